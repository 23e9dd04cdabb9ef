//go:build acceptance

package main

import (
	"errors"
	"testing"
	"time"
)

// Issue 26's bounds: `attach http://127.0.0.1:<closed port> --no-tui`, with
// the default --give-up (30 s), exits 1 within 35 s; an agent of three
// killed is said lost within 5 s.
func TestAttachToAClosedPortExitsWithin35s(t *testing.T) {
	refused := refusedAddr(t)
	start := time.Now()
	never := func(string) bool { return false }
	_, stderr, err := attachUntil(t, never, "--no-tui", "http://"+refused)
	took := time.Since(start)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitFailure {
		t.Fatalf("err = %v, want exit %d\nstderr:\n%s", err, exitFailure, stderr)
	}
	t.Logf("exit 1 after %v: %v", took.Round(time.Millisecond), err)
	if took > 35*time.Second {
		t.Errorf("attach gave up after %v, want within 35 s", took)
	}
}

func TestAnAgentKilledIsSaidLostWithin5s(t *testing.T) {
	names := []string{"east", "west", "north"}
	urls := make([]string, len(names))
	kills := map[string]func(){}
	for i, name := range names {
		urls[i], kills[name] = liveAgent(t, name)
	}
	var killedAt time.Time
	var took time.Duration
	lost := func(stderr string) bool {
		if killedAt.IsZero() {
			for _, name := range names {
				if !hasLine(stderr, name+": ", "clock ") {
					return false
				}
			}
			killedAt = time.Now()
			kills["west"]()
		}
		if hasLine(stderr, "west: ", "lost: ") {
			took = time.Since(killedAt)
			return true
		}
		return false
	}
	out, stderr, err := attachUntil(t, lost, append([]string{"--no-tui", "--json", "--token", "tok"}, urls...)...)
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, stderr)
	}
	t.Logf("west said lost %v after it was killed", took.Round(time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("west said lost %v after it was killed, want within 5 s", took)
	}
	if got := attachStates(t, out); got.Connections["west"].State != "lost" || got.LiveAgents != 2 {
		t.Errorf("JSON states %+v, live %d: want west lost, 2 live", got.Connections, got.LiveAgents)
	}
}
