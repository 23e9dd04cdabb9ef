// Package fleet merges several agents' events into one timeline: one
// aggregator fed every agent's requests, markers and losses, each moved by
// its agent's clock offset onto the local clock. Its distributions are
// those of the union of the agents' requests, exactly (percentiles are
// never averaged), and every surface that shows the fleet (the dashboard's
// fleet view, attach's --json and its final summary) reads this one
// aggregator, so they agree.
//
// Server, probe and GPU samples stay per agent: one server's queue or one
// host's GPU is no fleet figure. What an agent's probe only measured is
// judged per agent, as the agent's own view judges it (one
// aggregate.ProbeJudge per Source): its stall markers, its limit, its
// requests' Nagle suspicion. The fleet's request sample (the dashboard's
// requests view) is its aggregator's.
package fleet

import (
	"context"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
)

// Name is the fleet's session name.
const Name = "fleet"

// Config tunes a Fleet. The zero value is usable.
type Config struct {
	// SampleKeep is the size of each list of the fleet's request sample
	// (aggregate.Config.SampleKeep: 0, the default).
	SampleKeep int
}

// Fleet is the merged view of several agents: one aggregate.Merged fed by
// each agent's Source. Safe for concurrent use.
type Fleet struct {
	merged *aggregate.Merged
}

// New returns an empty Fleet.
func New(cfg Config) *Fleet {
	return &Fleet{merged: aggregate.NewMerged(Name, aggregate.Config{SampleKeep: cfg.SampleKeep})}
}

// Snapshot is the fleet's snapshot at the newest event time of any agent,
// and a version that moves with every event taken.
func (f *Fleet) Snapshot() (aggregate.Snapshot, uint64) { return f.merged.Snapshot() }

// Summary is the fleet's summary, for the end of an attach: call it once
// every agent's source has returned.
func (f *Fleet) Summary() aggregate.Summary { return f.merged.Summary() }

// Source wraps one agent's source: every event goes on unchanged to the
// agent's own pipeline (its timeline is the agent's clock), and to the
// fleet judged (an aggregate.ProbeJudge of the agent's own) and moved by
// offset, which is read as each event passes, in the source's goroutine,
// so an offset estimated again at a reconnection applies from that
// connection's first event on. offset returns the agent's clock minus the
// local clock (0 while unknown). When the source returns, the stalls its
// judge still holds are the fleet's too.
func (f *Fleet) Source(src pipeline.Source, offset func() time.Duration) pipeline.Source {
	return pipeline.SourceFunc(func(ctx context.Context, emit func(event.Event)) error {
		judge := aggregate.NewProbeJudge()
		err := src.Run(ctx, func(ev event.Event) {
			judged, derived := judge.Add(ev)
			off := offset()
			f.merged.Add(judged, off)
			f.addMarkers(derived, off)
			emit(ev)
		})
		f.addMarkers(judge.Flush(), offset())
		return err
	})
}

// addMarkers adds markers an agent's judge derived.
func (f *Fleet) addMarkers(ms []event.Marker, offset time.Duration) {
	for i := range ms {
		f.merged.Add(event.NewMarker(&ms[i]), offset)
	}
}
