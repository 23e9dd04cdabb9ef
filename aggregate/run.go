package aggregate

import (
	"context"
	"time"

	"github.com/latscope/latscope/event"
)

// DefaultEvery is the snapshot period Run uses when given none: about 4 Hz,
// fast enough for a live view, far slower than requests arrive.
const DefaultEvery = 250 * time.Millisecond

// unchangedEvery is how often Run publishes a snapshot while no event
// arrived since the last one: such a snapshot differs from the last only
// by the time (the elapsed time, windows moving on by their 1 s slots), so
// twice a second keeps every second of a clock shown, and a live view
// idle between requests takes half the snapshots it would.
const unchangedEvery = 500 * time.Millisecond

// Run owns a on the calling goroutine: it adds events from in as they come
// and publishes a snapshot every period (and once more at the end). It
// returns the run's Summary when in is closed or ctx ends. publish is called
// on this goroutine and should hand the snapshot off quickly (e.g. a
// non-blocking send); it may be nil.
//
// Window edges come from cfg.Now when set, else from the latest event time.
func (a *Aggregator) Run(ctx context.Context, in <-chan event.Event, every time.Duration, publish func(Snapshot)) Summary {
	if every <= 0 {
		every = DefaultEvery
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	emit := func() {
		if publish != nil {
			publish(a.Snapshot(a.now()))
		}
	}
	// Without a new event, only every skipTicks-th tick publishes.
	skipTicks := max(int(unchangedEvery/every), 1)
	changed, unchanged := false, 0
	for {
		select {
		case ev, ok := <-in:
			if !ok {
				a.finish() // the last snapshot lists what the summary will
				a.ended = true
				emit()
				return a.Summary()
			}
			a.Add(ev)
			changed = true
		case <-tick.C:
			if unchanged++; !changed && unchanged < skipTicks {
				continue
			}
			changed, unchanged = false, 0
			emit()
		case <-ctx.Done():
			a.drain(in)
			a.finish()
			emit()
			return a.Summary()
		}
	}
}

// drain adds the events already buffered in in, without waiting for more, so
// records sent just before cancellation still count. It takes at most what
// was buffered when it began, so a producer that keeps sending cannot hold it.
func (a *Aggregator) drain(in <-chan event.Event) {
	for n := len(in); n > 0; n-- {
		select {
		case ev, ok := <-in:
			if !ok {
				return
			}
			a.Add(ev)
		default:
			return
		}
	}
}

func (a *Aggregator) now() time.Time {
	if a.cfg.Now != nil {
		return a.cfg.Now()
	}
	return a.latest
}
