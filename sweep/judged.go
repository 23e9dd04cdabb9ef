package sweep

import (
	"github.com/latscope/latscope/aggregate/sweepjudge"
	"github.com/latscope/latscope/event"
)

// ResultOf draws the sweep's findings from the steps its judge measured
// (a live sweep's, or a recording's judged again by sweepjudge.Recorded).
func ResultOf(s sweepjudge.Sweep) Result {
	res := NewResult(s.Steps, s.SLO)
	if res.Mode == OpenLoop {
		res.Arrival = s.Arrival
	}
	res.Stopped, res.Interrupted = s.Stopped, s.Interrupted
	return res
}

// newJudge makes the judge of set's sweep; it publishes the sweep's
// progress to set.Progress, if any. The live sweep adds its stepper's
// hooks to opt.
func newJudge(set *settings, opt sweepjudge.Options) (*sweepjudge.Judge, error) {
	opt.Rules = set.Rules
	if set.Progress != nil {
		opt.Progress = func(s sweepjudge.Sweep, live *Live) {
			set.Progress(Progress{Result: ResultOf(s), Current: live})
		}
	}
	return sweepjudge.New(opt)
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
	j, err := newJudge(&set, sweepjudge.Options{})
	if err != nil {
		return Result{}, err
	}
	for ev := range events {
		j.Add(ev)
	}
	j.End()
	res := ResultOf(j.Sweep())
	res.Stopped = "the recording ended"
	if n := len(res.Steps); n > 0 && res.Steps[n-1].Interrupted {
		res.Stopped, res.Interrupted = "interrupted", true
	}
	if set.Progress != nil {
		set.Progress(Progress{Result: res, Done: true})
	}
	return res, nil
}
