package sweep

import (
	"time"

	"github.com/latscope/latscope/event"
)

// judge reads the sweep's stream and measures each step as its events come
// by: a pure function of the stream (and the settings), so it judges a
// recorded sweep as it judged the live one.
type judge struct {
	set     *settings
	stepper *stepper // told to end a step, and given each step's result; nil when replaying

	cur         *meter
	steps       []Step
	lastPublish time.Time
	arrival     string // from the session header, for the result
}

// result is the result of the steps judged so far.
func (j *judge) result() Result {
	res := NewResult(j.steps, j.set.SLO)
	if res.Mode == OpenLoop {
		res.Arrival = j.arrival
	}
	return res
}

func (j *judge) run(events <-chan event.Event) {
	for ev := range events {
		j.add(ev)
	}
	if j.cur != nil {
		// The stream ended inside a step (interrupted, or a source failed).
		j.cur.interrupted = j.cur.interrupted || !j.cur.complete()
		j.finishStep()
	}
}

func (j *judge) add(ev event.Event) {
	if ev.Kind == event.KindSession && ev.Session != nil {
		j.arrival = ev.Session.Load.Arrival
		return
	}
	if mk, ok := parseMarker(ev); ok {
		j.onMarker(mk, ev.Marker.Time)
		return
	}
	if j.cur == nil {
		return // between steps
	}
	if j.cur.add(ev) && j.stepper != nil {
		j.stepper.end(j.cur.spec.Index, j.cur.reason)
	}
	if j.cur.complete() {
		j.finishStep()
		return
	}
	if !j.cur.clock.Before(j.lastPublish.Add(j.set.Interval)) {
		j.publishLive()
	}
}

func (j *judge) onMarker(mk stepMarker, t time.Time) {
	switch mk.phase {
	case phaseStart:
		if j.cur != nil {
			// A start without the previous step's end: the stream lost it.
			j.cur.interrupted = true
			j.finishStep()
		}
		j.cur = newMeter(j.set, mk.spec, t)
		j.publishLive()
	case phaseEnd:
		if j.cur == nil || j.cur.spec.Index != mk.spec.Index {
			return
		}
		j.cur.ended(t, mk.requests, mk.cause, mk.interrupted)
		if j.cur.complete() {
			j.finishStep()
		}
	}
}

// finishStep judges the current step on everything it got and hands the
// result to the stepper, which waits for it before planning the next step.
func (j *judge) finishStep() {
	m := j.cur
	j.cur = nil
	m.finish()
	step, _ := m.result()
	markFlatThroughput(&step, j.steps, j.set.Tolerance)
	j.steps = append(j.steps, step)
	if j.stepper != nil {
		select {
		case j.stepper.verdicts <- step:
		default: // the stepper was interrupted and is not waiting
		}
	}
	j.publish(j.result(), nil, false)
}

func (j *judge) publishLive() {
	m := j.cur
	j.lastPublish = m.clock
	if j.set.Progress == nil {
		return
	}
	step, snap := m.result()
	live := &Live{Step: step, Phase: m.phase(), Elapsed: m.clock.Sub(m.start), Snapshot: snap}
	j.publish(j.result(), live, false)
}

func (j *judge) publish(res Result, live *Live, done bool) {
	if j.set.Progress != nil {
		j.set.Progress(Progress{Result: res, Current: live, Done: done})
	}
}

// Replay judges a recorded sweep: the events of a session that ran one, in
// the order they were recorded (its step markers bound the steps). With
// the settings the sweep ran with it returns the steps as the live sweep
// judged them. Only cfg's rules are used (Warmup, Window, StepMax,
// Interval, Tolerance, MinGrowth, StopErrors, SLO, Progress).
func Replay(events <-chan event.Event, cfg Config) (Result, error) {
	set, err := cfg.rules()
	if err != nil {
		return Result{}, err
	}
	j := &judge{set: &set}
	j.run(events)
	res := j.result()
	res.Stopped = "the recording ended"
	if n := len(res.Steps); n > 0 && res.Steps[n-1].Interrupted {
		res.Stopped, res.Interrupted = "interrupted", true
	}
	j.publish(res, nil, true)
	return res, nil
}
