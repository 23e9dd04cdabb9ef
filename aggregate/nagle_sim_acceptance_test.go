//go:build acceptance

package aggregate_test

// Acceptance tier (go test -tags acceptance -p 1): the Nagle flag against
// the simulator's delayed-ACK holds in real time; on a starved host the
// probe's reads, not the holds, shape the gaps (seen: nagle=true flagged
// too few); see CONTRIBUTING.md.

import (
	"fmt"
	"testing"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/sim"
)

// Nagle's delayed-ACK holds repeat on each connection: with the mode on,
// most requests are flagged; without it (the runs above), none.
func TestNagleSuspectWithTheSimulator(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("timing on the calibrated profile: not under -short or -race")
	}
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint("nagle=", on), func(t *testing.T) {
			prof := h100(t)
			prof.MaxNumSeqs = 8
			url := startSim(t, sim.Config{Profile: prof, Nagle: on, Seed: 1})
			res := runLoad(t, simClient(t, url, nil), probe.LoadConfig{Concurrency: 12, Requests: 24}, prompts(t, 512, 64, 1), nil)
			n, ok := res.flagged(event.FlagNagleSuspect)
			t.Logf("nagle %v: %d of %d requests flagged; stall causes %v", on, n, ok, res.causes())
			switch {
			case ok != 24:
				t.Fatalf("%d of 24 requests ok", ok)
			case on && 2*n <= ok:
				t.Errorf("Nagle on: %d of %d requests flagged, want most", n, ok)
			case !on && n != 0:
				t.Errorf("Nagle off: %d of %d requests flagged, want none", n, ok)
			}
		})
	}
}
