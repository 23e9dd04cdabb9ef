package report

import (
	"slices"
	"time"

	"github.com/latscope/latscope/aggregate"
)

// plan lists the moments of the replay at which a snapshot is taken: the
// series' points and the ends of the comparison's windows, in time order.
type plan struct {
	start    time.Time // the session's start: a point's At counts from here
	step     time.Duration
	window   aggregate.Window
	instants []instant
	next     int
}

// instant is a snapshot's time, one nanosecond before a boundary, so that
// the aggregator's window ending there holds the events before the boundary
// and none at it.
type instant struct {
	at     time.Time
	point  bool // a series point ends here
	window bool // a comparison window ends here
}

func newPlan(s scan) *plan {
	p := &plan{start: s.start, window: aggregate.Win10s}
	if s.start.IsZero() || !s.latest.After(s.start) {
		return p
	}
	// Boundaries fall on whole seconds, where the aggregator's slots begin.
	origin := s.start.Truncate(time.Second)
	p.step = chooseStep(s.latest.Sub(origin))
	p.window = windowFor(p.step)
	for t := origin.Add(p.step); ; t = t.Add(p.step) {
		p.instants = append(p.instants, instant{at: t.Add(-1), point: true})
		if !t.Before(s.latest) {
			break
		}
	}
	if !s.firstDone.IsZero() {
		for t := s.firstDone.Truncate(time.Second).Add(CompareWindow); !t.After(s.lastDone); t = t.Add(CompareWindow) {
			p.instants = append(p.instants, instant{at: t.Add(-1), window: true})
		}
	}
	slices.SortStableFunc(p.instants, func(a, b instant) int { return a.at.Compare(b.at) })
	// A boundary that is both a point and a window end needs one snapshot.
	merged := p.instants[:0]
	for _, in := range p.instants {
		if n := len(merged); n > 0 && merged[n-1].at.Equal(in.at) {
			merged[n-1].point = merged[n-1].point || in.point
			merged[n-1].window = merged[n-1].window || in.window
			continue
		}
		merged = append(merged, in)
	}
	p.instants = merged
	return p
}

// takeBefore takes the snapshots of every instant before t, which the
// replay is about to pass.
func (p *plan) takeBefore(t time.Time, agg *aggregate.Aggregator, rec *Recording) {
	for p.next < len(p.instants) && p.instants[p.next].at.Before(t) {
		p.take(p.instants[p.next], agg, rec)
		p.next++
	}
}

// takeRest takes the snapshots still due at the end of the replay.
func (p *plan) takeRest(agg *aggregate.Aggregator, rec *Recording) {
	for ; p.next < len(p.instants); p.next++ {
		p.take(p.instants[p.next], agg, rec)
	}
}

func (p *plan) take(in instant, agg *aggregate.Aggregator, rec *Recording) {
	snap := agg.Snapshot(in.at)
	if in.point {
		rec.Series.Points = append(rec.Series.Points, pointOf(snap, p.window, in.at.Add(1).Sub(p.start)))
	}
	if in.window {
		rec.Windows = append(rec.Windows, snap.Windows[aggregate.Win10s])
	}
}
