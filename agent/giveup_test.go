package agent

import (
	"net"
	"strings"
	"testing"
	"time"
)

// closedAddr is a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// An agent never reached within GiveUp is given up: Run returns by itself,
// nil (other agents may be live), and the status says so with the last
// connection error.
func TestAttachGivesUpAnAgentNeverReached(t *testing.T) {
	t.Parallel()
	c := attach(t, ClientConfig{URL: "http://" + closedAddr(t), GiveUp: 50 * time.Millisecond})
	if _, err := c.finish(t); err != nil {
		t.Fatalf("Run = %v, want nil: giving up one agent is not an error of the attach", err)
	}
	st := c.Status()
	if st.State != GaveUp || st.Connections != 0 {
		t.Fatalf("status %+v: want gave up, never connected", st)
	}
	for _, want := range []string{"not reached in 50ms", "cannot reach", "connection refused"} {
		if !strings.Contains(st.Err, want) || !strings.Contains(st.LastErr, want) {
			t.Errorf("status err %q, last %q: want %q", st.Err, st.LastErr, want)
		}
	}
	if !st.DownSince.IsZero() {
		t.Errorf("down since %v: an agent never reached was never lost", st.DownSince)
	}
}

// An agent reached once and then cut off is retried past GiveUp (it may
// be restarting), and its status says since when it is down; a new
// connection clears that.
func TestAttachKeepsRetryingAnAgentItReached(t *testing.T) {
	t.Parallel()
	a := startAgent(t, Config{})
	publishAll(t, a.Server, sessionEvent("rack-7"))
	p := newCutProxy(t, a.addr, 0)
	c := attach(t, ClientConfig{URL: p.url(), GiveUp: time.Nanosecond})
	c.untilState(t, Streaming)
	p.cutNow()
	for {
		st := c.untilState(t, Reconnecting)
		if st.DownSince.IsZero() {
			t.Fatalf("status %+v: reconnecting after a connection, yet not down", st)
		}
		if st.Attempt >= 3 {
			break
		}
	}
	if st := c.Status(); st.State == GaveUp {
		t.Fatalf("status %+v: gave up an agent it had reached", st)
	}
	p.up()
	if st := c.untilState(t, Streaming); !st.DownSince.IsZero() || st.Connections < 2 {
		t.Fatalf("status %+v: back, yet still down", st)
	}
}
