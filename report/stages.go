package report

import (
	"iter"
	"maps"
	"slices"

	"github.com/latscope/latscope/event"
)

// clientStages is the order the probe measures the client stages in, then
// a reasoning model's thinking up to its first answer token.
var clientStages = append(event.ClientStages(), event.StageThinking)

// breakdownStages is the order a request's time passes through the
// breakdown stages: the client's own stages, then the server window, then
// a reasoning model's thinking.
var breakdownStages = append(event.BreakdownStages(), event.StageThinking)

// orderedStages returns the stages of every set, once each: those in
// canonical in its order, then the others sorted. Pass maps.Keys(m).
func orderedStages(canonical []event.Stage, sets ...iter.Seq[event.Stage]) []event.Stage {
	seen := make(map[event.Stage]bool)
	for _, set := range sets {
		for k := range set {
			seen[k] = true
		}
	}
	out := make([]event.Stage, 0, len(seen))
	for _, s := range canonical {
		if seen[s] {
			out = append(out, s)
			delete(seen, s)
		}
	}
	return append(out, slices.Sorted(maps.Keys(seen))...)
}
