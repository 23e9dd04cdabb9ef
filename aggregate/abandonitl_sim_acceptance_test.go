//go:build acceptance

package aggregate_test

// The other streams' ITL after an abandonment, against the simulator with
// a decode step that grows with the batch: a server that keeps decoding
// an abandoned request for nobody shows longer gaps in the 2 s after it
// than in the rest of the run; one that frees the slot shows the same.

import (
	"testing"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/sim"
)

// abandonITLRun streams 30 requests of 200 tokens over three streams, a
// tenth of them abandoned after 8 tokens, and returns the aggregator's
// split of the gaps. The profile's decode step is 2 ms plus 3 ms a
// sequence: 8.5 ms for the three streams, 11.5 ms while one more decodes
// for nobody, which it does (with keep) for about 2.2 s: the whole window.
func abandonITLRun(t *testing.T, keep bool) *aggregate.Abandoned {
	t.Helper()
	prof := h100(t)
	prof.StepOverhead, prof.DecodeBase, prof.DecodePerSeq = 500*time.Microsecond, 2*time.Millisecond, 3*time.Millisecond
	url := startSim(t, sim.Config{Profile: prof, Seed: 1, KeepAbandoned: keep})
	res := runLoad(t, simClient(t, url, nil), probe.LoadConfig{Concurrency: 3, Requests: 30, Seed: 7,
		Cancel: probe.CancelPolicy{Tokens: 8, Share: 0.1}}, prompts(t, 32, 200, 5), nil)
	agg := aggregate.New(aggregate.Config{})
	abandoned, failed := 0, 0
	for _, r := range res.recs {
		switch {
		case r.Abandoned():
			abandoned++
		case r.Failed():
			failed++
		}
		agg.Add(event.NewRequest(r))
	}
	if failed > 0 || abandoned < 2 {
		t.Fatalf("keep %v: %d failed, %d abandoned; want none failed and at least 2 abandoned", keep, failed, abandoned)
	}
	a := agg.Snapshot(time.Now()).Abandoned
	if a == nil || a.ITLAfter == nil || a.ITLRest == nil {
		t.Fatalf("keep %v: no ITL split in the snapshot: %+v", keep, a)
	}
	t.Logf("keep %v: %d abandoned; ITL after mean %.2f ms p50 %.2f (%d gaps), rest mean %.2f ms p50 %.2f (%d gaps)",
		keep, abandoned, a.ITLAfter.Mean, a.ITLAfter.P50, a.ITLAfter.Count, a.ITLRest.Mean, a.ITLRest.P50, a.ITLRest.Count)
	return a
}

// TestAbandonITLSplitWithTheSimulator: freed at once, the gaps after an
// abandonment are within 10% of the rest's (by mean); decoded for nobody,
// over 20% longer (the configured step is 35% longer with the extra
// sequence). A slow host lengthens both sides alike.
func TestAbandonITLSplitWithTheSimulator(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("timing on a real-time simulator: not under -short or -race")
	}
	freed := abandonITLRun(t, false)
	kept := abandonITLRun(t, true)
	if r := freed.ITLAfter.Mean / freed.ITLRest.Mean; r < 0.9 || r > 1.1 {
		t.Errorf("slot freed at once: ITL after an abandonment %.2f× the rest's, want within 10%%", r)
	}
	if r := kept.ITLAfter.Mean / kept.ITLRest.Mean; r < 1.2 {
		t.Errorf("decoding for nobody: ITL after an abandonment %.2f× the rest's, want over 1.2×", r)
	}
}
