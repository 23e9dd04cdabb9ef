package main

import (
	"context"
	"sync"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/tui"
)

// fleet is the attach dashboard's view of all agents at once: one extra
// aggregator fed every agent's requests and markers, so its distributions
// are those of the union of the agents' requests, exactly (percentiles are
// never averaged). Server, probe and GPU samples stay per agent: one
// server's queue or one host's GPU is no fleet figure.
type fleet struct {
	mu      sync.Mutex
	agg     *aggregate.Aggregator
	sampler *tui.Sampler
	agents  int
	header  bool      // the fleet's session header was given
	now     time.Time // the newest event time of any agent
	version uint64    // events taken

	cached    aggregate.Snapshot
	cachedVer uint64
}

func newFleet(agents int) *fleet {
	return &fleet{agg: aggregate.New(aggregate.Config{}), sampler: tui.NewSampler(0), agents: agents}
}

// tap is the consumer that gives one agent's events to the fleet: it is
// lossless, as the aggregator is, so the fleet counts every request.
func (f *fleet) tap() consumer { return dashboardFleetTap{f} }

type dashboardFleetTap struct{ f *fleet }

func (t dashboardFleetTap) start(ctx context.Context, fan *pipeline.Fanout) func() error {
	sub := fan.Subscribe("fleet", 1024, pipeline.Lossless)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range sub.Events() {
			t.f.add(ev)
		}
	}()
	return func() error { <-done; return nil }
}

// add takes one agent event.
func (f *fleet) add(ev event.Event) {
	switch {
	case ev.Session != nil:
		f.mu.Lock()
		defer f.mu.Unlock()
		if !f.header { // the first agent's start is the fleet's
			h := *ev.Session
			h.Name, h.Target, h.Host = "fleet", "", "" // the header says "fleet · N agents"
			h.Load = event.Load{Mode: "fleet"}
			f.agg.Add(event.NewSession(&h))
			f.header = true
		}
		return
	case ev.Request == nil && ev.Marker == nil && ev.Loss == nil:
		return
	}
	if ev.Request != nil {
		f.sampler.Add(ev.Request)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.agg.Add(ev)
	if at := ev.Time(); at.After(f.now) {
		f.now = at
	}
	f.version++
}

// frame is the fleet's frame, its snapshot taken at the newest event time
// of any agent, and a version that moves with every event taken.
func (f *fleet) frame() (tui.Frame, uint64) {
	f.mu.Lock()
	if f.cachedVer != f.version || f.version == 0 {
		f.cached, f.cachedVer = f.agg.Snapshot(f.now), f.version
	}
	snap, v := f.cached, f.version
	f.mu.Unlock()
	return tui.Frame{Snapshot: snap, Requests: f.sampler.Sample(snap.Now)}, v + f.sampler.Version()
}
