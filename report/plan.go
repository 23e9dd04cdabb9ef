package report

import (
	"time"

	"github.com/latscope/latscope/aggregate"
)

// plan lists the moments of the replay at which a snapshot is taken for the
// series, in time order.
type plan struct {
	start  time.Time // the session's start: a point's At counts from here
	step   time.Duration
	window aggregate.Window
	// instants are the snapshots' times, each one nanosecond before a
	// point's boundary, so that the aggregator's window ending there holds
	// the events before the boundary and none at it.
	instants []time.Time
	next     int
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
		p.instants = append(p.instants, t.Add(-1))
		if !t.Before(s.latest) {
			break
		}
	}
	return p
}

// takeBefore takes the snapshots of every instant before t, which the
// replay is about to pass.
func (p *plan) takeBefore(t time.Time, agg *aggregate.Aggregator, rec *Recording) {
	for p.next < len(p.instants) && p.instants[p.next].Before(t) {
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

func (p *plan) take(at time.Time, agg *aggregate.Aggregator, rec *Recording) {
	rec.Series.Points = append(rec.Series.Points, pointOf(agg.Snapshot(at), p.window, at.Add(1).Sub(p.start)))
}
