package aggregate

import (
	"sync"
	"time"

	"github.com/latscope/latscope/event"
)

// Merged is one aggregator fed by several sources, each on a clock of its
// own, moved onto the local clock: the union of their requests, exactly
// (percentiles are never averaged). Safe for concurrent use: each source
// adds to it from its own goroutine.
type Merged struct {
	mu      sync.Mutex
	name    string
	agg     *Aggregator
	header  bool      // the fleet's session header was given
	now     time.Time // the newest event time of any agent, on the fleet's timeline
	version uint64    // events taken

	cached    Snapshot
	cachedVer uint64
}

// NewMerged returns an empty Merged whose session (the first source's
// header, made the merge's own) is called name; cfg configures its
// aggregator.
func NewMerged(name string, cfg Config) *Merged {
	return &Merged{name: name, agg: New(cfg)}
}

// Add takes one judged event of a source whose clock is offset from the
// local one (the source's clock minus the local clock): the event is moved
// by it onto the merged timeline. The first session header becomes the
// merge's (its objectives and TTFT basis, which the sources share); later
// ones, and the samples that describe one source's server, probe or GPU,
// are not the merge's. ev itself is not changed: its payload is shared
// with the source's own consumers.
func (f *Merged) Add(ev event.Event, offset time.Duration) {
	switch {
	case ev.Session != nil:
		f.mu.Lock()
		defer f.mu.Unlock()
		if !f.header {
			f.agg.Add(event.NewSession(mergedHeader(ev.Session, offset, f.name)))
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

// shift moves a source's time onto the merged timeline; an undated
// event stays undated.
func shift(t time.Time, offset time.Duration) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(-offset)
}

// mergedHeader is the merge's session header, from the first source's: its
// start on the merged timeline, its objectives and TTFT basis, but not its
// target, host, region, shard or load, which are that source's alone.
func mergedHeader(h *event.Session, offset time.Duration, name string) *event.Session {
	out := *h
	out.Time = shift(h.Time, offset)
	out.Name, out.Target, out.MetricsURL, out.Host, out.Region, out.Shard = name, "", "", "", "", ""
	out.Load = event.Load{Mode: name, SLO: h.Load.SLO, TTFTBasis: h.Load.TTFTBasis}
	return &out
}

// Snapshot is the merge's snapshot at the newest event time of any source,
// and a version that moves with every event taken.
func (f *Merged) Snapshot() (Snapshot, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cachedVer != f.version || f.version == 0 {
		f.cached, f.cachedVer = f.agg.Snapshot(f.now), f.version
	}
	return f.cached, f.version
}

// Summary is the merge's summary: call it once every source has returned.
func (f *Merged) Summary() Summary {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.agg.Summary()
}
