package tui

import (
	"sync"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/sweep"
)

// SweepFeed shows a sweep on the dashboard: the running step's snapshot in
// the main panels (its request sample in the requests view: the step's
// measured requests), the sweep's curve in place of the charts.
type SweepFeed struct {
	progress *pipeline.Latest[sweep.Progress]
	header   *event.Session

	mu   sync.Mutex
	last aggregate.Snapshot // the latest step's, kept once the sweep is done
}

// NewSweepFeed returns a feed of the sweep whose progress is put in
// progress; header is the session shown before the first step's snapshot.
func NewSweepFeed(progress *pipeline.Latest[sweep.Progress], header *event.Session) *SweepFeed {
	return &SweepFeed{progress: progress, header: header}
}

// Frame returns the sweep's progress with the running (or last) step's
// snapshot.
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
	return fr, v
}
