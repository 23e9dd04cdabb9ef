package sweepjudge

import (
	"slices"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// Phase is where a running step is.
type Phase string

// The phases of a step.
const (
	PhaseWarmup    Phase = "warm-up"      // kept out of the statistics
	PhaseMeasuring Phase = "measuring"    // waiting for the step to settle
	PhaseCoolDown  Phase = "cooling down" // decided; its requests in flight are being cut off
)

// Live is the running step.
type Live struct {
	// Step holds the step's figures over what has been measured so far;
	// its verdict fields are not final.
	Step    Step
	Phase   Phase
	Elapsed time.Duration // since the step began, in event time
	// Snapshot is the step's aggregator: the measured requests only.
	Snapshot aggregate.Snapshot
}

// Sweep is a sweep as judged so far: its finished steps and what the
// stream said about it.
type Sweep struct {
	Steps []Step                // in the order they ran
	SLO   []aggregate.Objective // the objectives the steps were checked against
	// Arrival is the open-loop arrival process, from the session header.
	Arrival string
	// Stopped says why the sweep ended and Interrupted whether it was
	// stopped; only a recording's judge (Recorded) reads them from the
	// stream.
	Stopped     string
	Interrupted bool
}

// Options are a Judge's rules and the hooks it calls, one at a time, from
// the goroutine that calls Add and End.
type Options struct {
	Rules Rules
	// Header is the live session's header: each step's probe judge is
	// told its server, as the stream was. Nil when judging a recording.
	Header *event.Session
	// Decided is called when an event decided the running step (steady,
	// saturated, failing, or past StepMax): the live sweep ends it.
	Decided func(index int, reason string)
	// Finished is called with each step once it has been judged whole.
	Finished func(Step)
	// Progress, when set, is called with the finished steps and the
	// running step every Interval of event time, and with the steps alone
	// (live nil) at each step's end.
	Progress func(s Sweep, live *Live)
}

// Judge reads a sweep's stream and measures each step as its events come
// by: a pure function of the stream (and the rules), so it judges a
// recorded sweep as it judged the live one. One goroutine owns it.
type Judge struct {
	opt         Options
	cur         *meter
	steps       []Step
	lastPublish time.Time
	arrival     string // from the session header, for the result
}

// New makes a judge; it fills in the rules' defaults and checks them.
func New(opt Options) (*Judge, error) {
	rules, err := opt.Rules.Fill()
	if err != nil {
		return nil, err
	}
	opt.Rules = rules
	return &Judge{opt: opt}, nil
}

// Sweep is the sweep as judged so far: the steps finished.
func (j *Judge) Sweep() Sweep {
	return Sweep{Steps: slices.Clone(j.steps), SLO: j.opt.Rules.SLO, Arrival: j.arrival}
}

// End judges the step the stream ended inside (interrupted, or a source
// failed), if any, on what it had.
func (j *Judge) End() {
	if j.cur != nil {
		j.cur.interrupted = j.cur.interrupted || !j.cur.complete()
		j.finishStep()
	}
}

// Add takes the stream's next event.
func (j *Judge) Add(ev event.Event) {
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
	if j.cur.add(ev) && j.opt.Decided != nil {
		j.opt.Decided(j.cur.spec.Index, j.cur.reason)
	}
	if j.cur.complete() {
		j.finishStep()
		return
	}
	if !j.cur.clock.Before(j.lastPublish.Add(j.opt.Rules.Interval)) {
		j.publishLive()
	}
}

func (j *Judge) onMarker(mk stepMarker, t time.Time) {
	switch mk.phase {
	case phaseStart:
		if j.cur != nil {
			// A start without the previous step's end: the stream lost it.
			j.cur.interrupted = true
			j.finishStep()
		}
		j.cur = newMeter(&j.opt.Rules, j.opt.Header, mk.spec, t)
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
// result to Finished (the live sweep's stepper waits for it before
// planning the next step).
func (j *Judge) finishStep() {
	m := j.cur
	j.cur = nil
	m.finish()
	step, _ := m.result()
	markFlatThroughput(&step, j.steps, j.opt.Rules.Tolerance)
	j.steps = append(j.steps, step)
	if j.opt.Finished != nil {
		j.opt.Finished(step)
	}
	if j.opt.Progress != nil {
		j.opt.Progress(j.Sweep(), nil)
	}
}

func (j *Judge) publishLive() {
	m := j.cur
	j.lastPublish = m.clock
	if j.opt.Progress == nil {
		return
	}
	step, snap := m.result()
	live := &Live{Step: step, Phase: m.phase(), Elapsed: m.clock.Sub(m.start), Snapshot: snap}
	j.opt.Progress(j.Sweep(), live)
}
