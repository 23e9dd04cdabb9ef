package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/agent"
	"github.com/latscope/latscope/event"
)

// attachUntil runs `latscope attach args...` until stderr satisfies done,
// then stops it as Ctrl-C would and returns stdout, stderr and its error.
// done is checked at every line written; the guard only ends a test that
// would otherwise hang.
func attachUntil(t *testing.T, done func(stderr string) bool, args ...string) (string, string, error) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var stdout bytes.Buffer
	stderr := newLines()
	root := newRootCmd()
	root.SetArgs(append([]string{"attach"}, args...))
	root.SetOut(&stdout)
	root.SetErr(stderr)
	result := make(chan error, 1)
	go func() { result <- root.ExecuteContext(ctx) }()
	guard := time.NewTimer(2 * time.Minute)
	defer guard.Stop()
	for !done(stderr.String()) {
		select {
		case <-stderr.wrote:
		case err := <-result:
			return stdout.String(), stderr.String(), err
		case <-guard.C:
			stop()
			<-result
			t.Fatalf("attach never got there; stderr:\n%s", stderr.String())
		}
	}
	stop()
	err := <-result
	return stdout.String(), stderr.String(), err
}

// refusedAddr is a loopback address where nothing listens.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Agents that cannot be reached are said as it happens, each with its
// reason; an attach that reached none fails with exit 1 naming each agent
// and its last error, and prints no all-zero status lines.
func TestAttachThatReachesNoAgentSaysWhyAndFails(t *testing.T) {
	t.Parallel()
	refused := refusedAddr(t)
	loop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Path, http.StatusFound)
	}))
	t.Cleanup(loop.Close)
	stalled, _ := silentServer(t)
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	t.Cleanup(broken.Close)
	locked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}))
	t.Cleanup(locked.Close)
	host := func(u string) string { return strings.TrimPrefix(u, "http://") }

	want := map[string]string{ // each agent's line
		refused:          "connection refused; retrying in",
		host(loop.URL):   "stopped after 10 redirects; retrying in",
		stalled:          "timeout awaiting response headers; retrying in",
		host(broken.URL): "the agent answered 500 Internal Server Error; retrying in",
		host(locked.URL): "gave up: the agent refused the token (401 Unauthorized)",
	}
	said := func(stderr string) bool {
		for name, text := range want {
			if !hasLine(stderr, name+": ", text) {
				return false
			}
		}
		return true
	}
	stdout, stderr, err := attachUntil(t, said, "--no-tui", "--connect-timeout", "300ms",
		"http://"+refused, loop.URL, "http://"+stalled, broken.URL, locked.URL)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitFailure {
		t.Fatalf("err = %v, want exit %d\nstderr:\n%s", err, exitFailure, stderr)
	}
	for name := range want {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("the error does not name agent %s: %v", name, err)
		}
		if !strings.Contains(stdout, "== agent "+name+" (") || !strings.Contains(stdout, "never connected: ") {
			t.Errorf("the summary does not say %s never connected:\n%s", name, stdout)
		}
	}
	if strings.Contains(stderr, "req/s") {
		t.Errorf("status lines for agents never reached:\n%s", stderr)
	}
}

// fakeAgent serves one session whose event ids go backwards twice, with a
// gap record for 5 events the agent no longer held, then ends it.
func fakeAgent(t *testing.T) *httptest.Server {
	t.Helper()
	frame := func(id int, ev event.Event) string {
		b, err := event.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("id: %d\ndata: %s\n\n", id, b)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	req := func(id string) event.Event {
		return event.NewRequest(&event.Request{ID: id, Start: at, Intended: at, Outcome: event.OutcomeOK})
	}
	header := event.NewSession(&event.Session{Time: at, Name: "east", Target: "http://x", Load: event.Load{Mode: "closed"}})
	gap := event.NewLoss(&event.Loss{Time: at, Consumer: "agent-stream", Events: 5, Reason: "no longer in the agent's ring"})
	body := frame(1, header) + frame(2, req("a")) + frame(2, req("a")) + frame(1, header) + frame(3, req("b")) +
		frame(9, gap) + frame(10, req("c")) + "event: end\ndata: {}\n\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set(agent.StreamHeader, "run-1")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Events whose ids go backwards are dropped, said when it happens and
// counted in the summary and its JSON; so is a gap the agent announces.
func TestAttachSaysAndCountsIDsGoingBackwards(t *testing.T) {
	t.Parallel()
	srv := fakeAgent(t)
	never := func(string) bool { return false } // the agent's session ends by itself
	stdout, stderr, err := attachUntil(t, never, "--no-tui", srv.URL)
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "east: 2 events dropped: their ids went backwards") {
		t.Errorf("stderr does not say ids went backwards:\n%s", stderr)
	}
	if !strings.Contains(stderr, "east: 5 events lost: the agent no longer held them") {
		t.Errorf("stderr does not say the gap:\n%s", stderr)
	}
	if !strings.Contains(stdout, "Lost events (not in these figures): agent-stream 5, attach 2") {
		t.Errorf("the summary does not count them:\n%s", stdout)
	}
	out, _, err := attachUntil(t, never, "--no-tui", "--json", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Agents      map[string]struct{ Lost map[string]int64 }
		Connections map[string]struct{ Connections int64 }
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Agents) != 1 {
		t.Fatalf("JSON: %v\n%s", err, out)
	}
	if got.Agents["east"].Lost[event.ConsumerAttach] != 2 || got.Connections["east"].Connections != 1 {
		t.Errorf("JSON lost %v, connections %d: want attach 2 and 1", got.Agents["east"].Lost, got.Connections["east"].Connections)
	}
}

// An attach where one agent was reached and another never was succeeds,
// and its summary says which one was never reached, and why.
func TestAttachSaysWhichAgentsNeverConnected(t *testing.T) {
	t.Parallel()
	srv := fakeAgent(t)
	refused := refusedAddr(t)
	done := func(stderr string) bool {
		return strings.Contains(stderr, refused+": cannot reach") && strings.Contains(stderr, "east: 2 events dropped")
	}
	stdout, stderr, err := attachUntil(t, done, "--no-tui", srv.URL, "http://"+refused)
	if err != nil {
		t.Fatalf("attach: %v, want success: one agent was reached\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "== agent "+refused+" (http://"+refused+"): never connected: cannot reach") {
		t.Errorf("the summary does not say which agent was never reached:\n%s", stdout)
	}
	if !strings.Contains(stderr, "1 of 2 agents never connected: "+refused) {
		t.Errorf("stderr does not say an agent was never reached:\n%s", stderr)
	}
}

// hasLine reports whether some line of text begins with prefix and holds
// want.
func hasLine(text, prefix, want string) bool {
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) && strings.Contains(line, want) {
			return true
		}
	}
	return false
}
