package tui

import (
	"maps"
	"slices"
	"testing"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// TestBarOrderIsTheReports': a reasoning model's band with stages the
// table does not name puts its segments in the order the reports chart
// them (event.BreakdownOrder): the thinking after the breakdown, the sum
// of the unnamed stages last.
func TestBarOrderIsTheReports(t *testing.T) {
	t.Parallel()
	var s aggregate.Snapshot
	stages := map[event.Stage]float64{event.StageQueue: 3, stageOther: 2, event.StageThinking: 5, event.StagePrefill: 1}
	s.Windows[aggregate.WinRun].Bands[aggregate.BandMean] = aggregate.Band{Requests: 1, TTFT: 11, Stages: stages}
	var got []event.Stage
	for _, seg := range breakdownOf(&s, aggregate.WinRun, aggregate.BandMean).segs {
		got = append(got, seg.stage)
	}
	want := []event.Stage{event.StageQueue, event.StagePrefill, event.StageThinking, stageOther}
	if !slices.Equal(got, want) || !slices.Equal(want, event.OrderStages(event.BreakdownOrder(), maps.Keys(stages))) {
		t.Errorf("bar segments %v, want %v", got, want)
	}
}
