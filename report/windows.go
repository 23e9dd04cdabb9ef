package report

import (
	"context"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// Window lengths for a comparison: 10 s, or shorter, down to 1 s, when the
// shorter run would have fewer than minWindows of them. With few windows
// the t-test has few degrees of freedom and cannot tell much from noise.
const (
	maxWindow  = 10 * time.Second
	minWindow  = time.Second
	minWindows = 10
)

// windowLength is the window both runs are cut into, from the span of the
// shorter run's completions.
func windowLength(a, b *Recording) time.Duration {
	span := min(a.scan.lastDone.Sub(a.scan.firstDone), b.scan.lastDone.Sub(b.scan.firstDone))
	return min(max((span/minWindows).Truncate(time.Second), minWindow), maxWindow)
}

// window is one window of a run: the summary of the events filed in it.
type window struct {
	length time.Duration
	aggregate.Summary
}

// windowsOf replays rec's file once more and cuts it into consecutive
// windows of length, from the first request's completion to the last whole
// window before the last completion. Each window's events go to an
// aggregator of their own, so its statistics are exactly those of the
// requests (and samples) that fall in it; a window with no events is kept
// (its throughput is zero). Events come in time order, so only one window
// is open at a time.
func windowsOf(ctx context.Context, rec *Recording, length time.Duration) ([]window, error) {
	s := rec.scan
	if s.firstDone.IsZero() || length <= 0 {
		return nil, nil
	}
	start := s.firstDone
	n := int(s.lastDone.Sub(start) / length)
	out := make([]window, 0, n)
	var agg *aggregate.Aggregator
	advance := func(k int) { // close windows until window k is open
		for len(out) < k {
			if agg == nil {
				agg = aggregate.New(aggregate.Config{})
			}
			out = append(out, window{length: length, Summary: agg.Summary()})
			agg = nil
		}
	}
	ro := &reorderer{lateness: s.lateness, release: func(at time.Time, ev event.Event) {
		if at.Before(start) {
			return
		}
		k := int(at.Sub(start) / length)
		if k >= n {
			return
		}
		advance(k)
		if agg == nil {
			agg = aggregate.New(aggregate.Config{})
		}
		agg.Add(ev)
	}}
	if _, err := readEvents(ctx, rec.file, rec.Path, ro.add); err != nil {
		return nil, err
	}
	ro.flush()
	advance(n)
	return out, nil
}
