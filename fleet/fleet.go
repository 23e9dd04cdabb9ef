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
	"sync"
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

// Fleet is the merged view of several agents. Safe for concurrent use: each
// agent's source adds to it from its own goroutine.
type Fleet struct {
	mu      sync.Mutex
	agg     *aggregate.Aggregator
	header  bool      // the fleet's session header was given
	now     time.Time // the newest event time of any agent, on the fleet's timeline
	version uint64    // events taken

	cached    aggregate.Snapshot
	cachedVer uint64
}

// New returns an empty Fleet.
func New(cfg Config) *Fleet {
	return &Fleet{agg: aggregate.New(aggregate.Config{SampleKeep: cfg.SampleKeep})}
}

// Add takes one judged event of an agent whose clock is offset from the
// local one (the agent's clock minus the local clock): the event is moved
// by it onto the fleet's timeline. An agent's raw stream goes through
// Source, which judges it first. The first session header becomes the fleet's (its
// objectives and TTFT basis, which the agents share); later ones, and the
// samples that describe one agent's server, probe or GPU, are not the
// fleet's. ev itself is not changed: its payload is shared with the agent's
// own consumers.
func (f *Fleet) Add(ev event.Event, offset time.Duration) {
	switch {
	case ev.Session != nil:
		f.mu.Lock()
		defer f.mu.Unlock()
		if !f.header {
			f.agg.Add(event.NewSession(fleetHeader(ev.Session, offset)))
			f.header = true
			f.version++
		}
		return
	case ev.Request != nil:
		r := *ev.Request
		r.Start, r.Intended = shift(r.Start, offset), shift(r.Intended, offset)
		ev = event.NewRequest(&r)
	case ev.Marker != nil:
		m := *ev.Marker
		m.Time = shift(m.Time, offset)
		ev = event.NewMarker(&m)
	case ev.Loss != nil:
		l := *ev.Loss
		l.Time = shift(l.Time, offset)
		ev = event.NewLoss(&l)
	default:
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.agg.Add(ev)
	if at := ev.Time(); at.After(f.now) {
		f.now = at
	}
	f.version++
}

// shift moves an agent's time onto the fleet's timeline; an undated
// event stays undated.
func shift(t time.Time, offset time.Duration) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(-offset)
}

// fleetHeader is the fleet's session header, from the first agent's: its
// start on the fleet's timeline, its objectives and TTFT basis, but not its
// target, host, region, shard or load, which are that agent's alone.
func fleetHeader(h *event.Session, offset time.Duration) *event.Session {
	out := *h
	out.Time = shift(h.Time, offset)
	out.Name, out.Target, out.MetricsURL, out.Host, out.Region, out.Shard = Name, "", "", "", "", ""
	out.Load = event.Load{Mode: Name, SLO: h.Load.SLO, TTFTBasis: h.Load.TTFTBasis}
	return &out
}

// Snapshot is the fleet's snapshot at the newest event time of any agent,
// and a version that moves with every event taken.
func (f *Fleet) Snapshot() (aggregate.Snapshot, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cachedVer != f.version || f.version == 0 {
		f.cached, f.cachedVer = f.agg.Snapshot(f.now), f.version
	}
	return f.cached, f.version
}

// Summary is the fleet's summary, for the end of an attach: call it once
// every agent's source has returned.
func (f *Fleet) Summary() aggregate.Summary {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.agg.Summary()
}

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
			f.Add(judged, off)
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
		f.Add(event.NewMarker(&ms[i]), offset)
	}
}
