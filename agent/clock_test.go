package agent

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// Agents whose clocks are off by +250 ms, 0 and -100 ms (injected clocks on
// the same machine): attach's estimate of each offset is within half the
// round trip of the ping it kept, the bound NTP's arithmetic gives, however
// slow the host; the figures are logged.
func TestClockOffsetIsEstimatedWithinHalfTheRoundTrip(t *testing.T) {
	t.Parallel()
	for _, skew := range []time.Duration{250 * time.Millisecond, 0, -100 * time.Millisecond} {
		a := startAgent(t, Config{Listen: ListenConfig{Token: rightToken}, Now: func() time.Time { return time.Now().Add(skew) }})
		c, err := NewClient(ClientConfig{URL: a.url, Token: rightToken})
		if err != nil {
			t.Fatal(err)
		}
		off, err := c.EstimateClockOffset(t.Context(), 8, nil)
		if err != nil {
			t.Fatal(err)
		}
		miss := (off.Offset - skew).Abs()
		t.Logf("skew %v: estimated %v (off by %v, bound %v, %d pings)", skew, off.Offset, miss, off.Bound(), off.Samples)
		// A microsecond for the wall clock's rounding on the wire.
		if off.Samples != 8 || miss > off.Bound()+time.Microsecond {
			t.Errorf("skew %v: estimated %v from %d pings, off by %v, more than half the round trip %v", skew, off.Offset, off.Samples, miss, off.RTT)
		}
	}
}

func TestClockOffsetNeedsTheToken(t *testing.T) {
	t.Parallel()
	a := startAgent(t, Config{Listen: ListenConfig{Token: rightToken}})
	c, err := NewClient(ClientConfig{URL: a.url, Token: wrongToken})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.EstimateClockOffset(t.Context(), 8, nil); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("with a wrong token: %v, want ErrUnauthorized", err)
	}
}

// At every connection the client estimates the agent's clock again, before
// that connection's events: an agent whose clock was stepped from +250 ms
// to -100 ms during an outage has its later events dated by the new
// offset. Both clocks are injected and stand still, so the estimate is
// exact (a zero round trip) however slow the host. The clock reading also
// says who the agent is (name, region, shard) before its header does.
func TestClockIsEstimatedAgainAtEveryConnection(t *testing.T) {
	t.Parallel()
	var skew atomic.Int64
	skew.Store(int64(250 * time.Millisecond))
	a := startAgent(t, Config{Now: func() time.Time { return t0.Add(time.Duration(skew.Load())) },
		Identity: Identity{Name: "rack-7", Region: "eu-west", Shard: "1/3"}})
	publishAll(t, a.Server, append([]event.Event{sessionEvent("rack-7")}, requests(0, 20)...)...)
	p := newCutProxy(t, a.addr, 0)

	type emitted struct {
		ev     event.Event
		offset time.Duration
		known  bool
	}
	got := make(chan emitted, 1000)
	c, err := NewClient(ClientConfig{URL: p.url(), ClockPings: 4, Now: func() time.Time { return t0 },
		Backoff: Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- c.Run(t.Context(), func(ev event.Event) {
			off, known := c.ClockOffset()
			got <- emitted{ev, off, known}
		})
	}()
	for range 21 {
		select {
		case <-got:
		case <-time.After(wait):
			t.Fatalf("the first connection's events did not come: %+v", c.Status())
		}
	}
	if st := c.Status(); st.ClockEstimates != 1 || st.Clock.Offset != 250*time.Millisecond || st.Region != "eu-west" || st.Shard != "1/3" {
		t.Fatalf("after the first connection: %+v", st)
	}
	// An outage; meanwhile the agent's clock is stepped and it publishes more.
	p.cutNow()
	skew.Store(int64(-100 * time.Millisecond))
	publishAll(t, a.Server, requests(20, 10)...)
	p.up()
	a.End()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait):
		t.Fatalf("the client did not end: %+v", c.Status())
	}
	close(got)
	n := 0
	for e := range got {
		n++
		if !e.known || e.offset != -100*time.Millisecond {
			t.Errorf("event %d after the reconnection was emitted with the offset %v (known %v), want the new -100ms", n, e.offset, e.known)
		}
	}
	// One estimate a connection (the cut may take the connection that
	// raced it too: the client then connects once more).
	st := c.Status()
	if n != 10 || st.Connections < 2 || int64(st.ClockEstimates) != st.Connections || st.Clock.Offset != -100*time.Millisecond ||
		st.Clock.RTT != 0 || st.ClockErr != "" || st.Name != "rack-7" {
		t.Fatalf("after the reconnection: %d events, status %+v: want the 10 new events and an exact estimate at every connection", n, st)
	}
}
