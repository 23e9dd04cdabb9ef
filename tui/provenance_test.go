package tui

import (
	"strings"
	"testing"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// TestLegendFollowsWindowProvenance: the legend marks a stage estimated
// ("~") by the window's majority provenance, "~?" when mixed, not by one
// request's; a negative residual is shown negative, with how many requests
// had one; the table's provenance column says the same.
func TestLegendFollowsWindowProvenance(t *testing.T) {
	t.Parallel()
	var s aggregate.Snapshot
	win := &s.Windows[aggregate.Win10s]
	win.Bands[aggregate.BandMean] = aggregate.Band{Requests: 272, TTFT: 40, Stages: map[event.Stage]float64{
		event.StageServerWait: 30, event.StagePrefill: 10.7, event.StageUnattributed: -0.7,
	}}
	win.Breakdown = map[event.Stage]aggregate.Stats{
		event.StageServerWait:   {Count: 272, Mean: 30},
		event.StagePrefill:      {Count: 272, Mean: 10.7},
		event.StageUnattributed: {Count: 272, Mean: -0.7, Negative: 120},
	}
	win.BreakdownProvenance = map[event.Stage]aggregate.ProvenanceMix{
		event.StageServerWait:   {Measured: 269, Estimated: 3},
		event.StagePrefill:      {Server: 136, Estimated: 136},
		event.StageUnattributed: {Estimated: 272},
	}
	// Over the run, every stage saw an estimate: the run's list must not decide.
	s.Breakdown.Stages = map[event.Stage]aggregate.BreakdownStage{
		event.StageServerWait: {Provenance: []event.Provenance{event.Measured, event.Estimated}},
		event.StagePrefill:    {Provenance: []event.Provenance{event.ServerReported, event.Estimated}},
	}
	bd := breakdownOf(&s, aggregate.Win10s, aggregate.BandMean)
	text := strings.Join(first(legend(newStyles(plainRenderer(), true), bd.segs, bd.total, 3, "", 200)), "\n")
	for _, want := range []string{"server_wait 30", "prefill~? 10.7", "unattributed~ -0.70", "(120 negative)", "~? mixed provenance"} {
		if !strings.Contains(text, want) {
			t.Errorf("legend %q: want %q", text, want)
		}
	}
	if strings.Contains(text, "server_wait~") {
		t.Errorf("legend %q: server wait marked estimated though 269 of 272 were measured", text)
	}
	for _, r := range tableRows(&s, aggregate.Win10s) {
		want := map[string]string{"server_wait": "measured", "prefill": "mixed", "unattributed": "estimated"}[r.name]
		if want != "" && r.prov != want {
			t.Errorf("table row %s: provenance %q, want %q", r.name, r.prov, want)
		}
	}
}
