package sweepjudge

import (
	"fmt"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// Recorded judges a recorded sweep again as its events are read, one at a
// time in the order they were recorded, with the rules the sweep recorded
// (its rules marker) and the SLO of its session header: the judge is a
// function of the stream, so its steps are the ones the live sweep
// printed, and its ended marker says why the sweep stopped. A report of
// the recording reads it without holding the events.
type Recorded struct {
	header *event.Session
	j      *Judge
	err    error

	stopped     string
	interrupted bool
	ended       bool
	done        bool
}

// Add takes the recording's next event.
func (r *Recorded) Add(ev event.Event) {
	if r.done || r.err != nil {
		return
	}
	if ev.Session != nil && r.header == nil {
		r.header = ev.Session
	}
	switch kind, m := sweepNote(ev); {
	case kind == sweepRules && r.j == nil:
		r.start(m)
	case kind == sweepEnded:
		r.stopped, r.interrupted, r.ended = stoppedOf(m), m.Values[keyInterrupted] == 1, true
	case r.j != nil:
		r.j.Add(ev)
	}
}

// start makes the judge from the rules marker m and the session header.
func (r *Recorded) start(m *event.Marker) {
	var slo []aggregate.Objective
	if r.header != nil && r.header.Load.SLO != "" {
		objectives, err := aggregate.ParseSLO(r.header.Load.SLO)
		if err != nil {
			r.err = fmt.Errorf("the sweep's SLO: %w", err)
			return
		}
		slo = objectives
	}
	j, err := New(Options{Rules: rulesOf(m, slo)})
	if err != nil {
		r.err = fmt.Errorf("the sweep's recorded rules: %w", err)
		return
	}
	r.j = j
	if r.header != nil {
		r.j.arrival = r.header.Load.Arrival
	}
}

func stoppedOf(m *event.Marker) string {
	const prefix = "sweep ended: "
	if len(m.Message) > len(prefix) && m.Message[:len(prefix)] == prefix {
		return m.Message[len(prefix):]
	}
	return m.Message
}

// Result is the sweep as judged from the events added so far; call it once
// they are all in (it ends a step the recording left open). ok is false
// when they held no sweep rules marker: not a sweep, or one recorded by a
// latscope that did not record its rules.
func (r *Recorded) Result() (s Sweep, ok bool, err error) {
	if r.err != nil {
		return Sweep{}, false, r.err
	}
	if r.j == nil {
		return Sweep{}, false, nil
	}
	if !r.done {
		r.done = true
		r.j.End() // the recording ended inside a step (interrupted, or cut short)
	}
	s = r.j.Sweep()
	s.Stopped, s.Interrupted = r.stopped, r.interrupted
	if !r.ended {
		s.Stopped = "the recording ended before the sweep did"
		if n := len(s.Steps); n > 0 && s.Steps[n-1].Interrupted {
			s.Interrupted = true
		}
	}
	return s, true, nil
}
