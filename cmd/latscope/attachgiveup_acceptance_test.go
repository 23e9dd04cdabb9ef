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
	_, stderr, took := killOneOfThree(t, "--json")
	t.Logf("west said lost %v after it was killed", took.Round(time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("west said lost %v after it was killed, want within 5 s\n%s", took, stderr)
	}
}
