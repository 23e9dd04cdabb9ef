package tui

import (
	"sync"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/sweep"
)

// SweepFeed shows a sweep on the dashboard: the running step's snapshot in
// the main panels, the sweep's curve in place of the charts.
type SweepFeed struct {
	progress *pipeline.Latest[sweep.Progress]
	sampler  *Sampler
	header   *event.Session

	mu   sync.Mutex
	last aggregate.Snapshot // the latest step's, kept once the sweep is done
}

// NewSweepFeed returns a feed of the sweep whose progress is put in
// progress; header is the session shown before the first step's snapshot.
func NewSweepFeed(progress *pipeline.Latest[sweep.Progress], header *event.Session) *SweepFeed {
	return &SweepFeed{progress: progress, sampler: NewSampler(0), header: header}
}

// Follow adds every finished request from sub (a lossy subscription) to
// the requests view on a goroutine of its own, until sub closes; the
// returned wait blocks until it has.
func (f *SweepFeed) Follow(sub *pipeline.Subscription) (wait func() error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range sub.Events() {
			if ev.Request != nil {
				f.sampler.Add(ev.Request)
			}
		}
	}()
	return func() error { <-done; return nil }
}

// Frame returns the sweep's progress with the running (or last) step's
// snapshot and the request sample.
func (f *SweepFeed) Frame() (Frame, uint64) {
	p, v := f.progress.Get()
	fr := Frame{Sweep: &p, Finished: p.Done}
	f.mu.Lock()
	if p.Current != nil {
		f.last = p.Current.Snapshot
	}
	fr.Snapshot = f.last
	f.mu.Unlock()
	if fr.Snapshot.Session == nil {
		fr.Snapshot.Session = f.header
	}
	fr.Requests = f.sampler.Sample(fr.Snapshot.Now)
	return fr, v + f.sampler.Version()
}
