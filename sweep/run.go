package sweep

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latscope/latscope/aggregate/sweepjudge"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
)

// Run runs the sweep: one pipeline for the whole sweep, whose primary
// source runs the steps one after another, with the aux sources and the
// stage running across all of them. It returns when the plan is done, a
// step cannot be built or its source fails, or ctx ends; the Result then
// covers the steps so far (Interrupted set), and every event emitted has
// reached every consumer of the fan-out.
//
// Two goroutines cooperate: the stepper (the pipeline's primary source)
// starts each step and marks its start and end in the stream; the judge
// reads the fan-out, measures the running step on the events' own times,
// tells the stepper to end it once it is decided, and hands back its
// result once every record of the step has come through.
func Run(ctx context.Context, cfg Config) (Result, error) {
	set, err := cfg.settings()
	if err != nil {
		return Result{}, err
	}
	fan := set.Fanout
	if fan == nil {
		fan = pipeline.NewFanout()
	}
	st := &stepper{set: &set, verdicts: make(chan Step, 1)}
	j, err := newJudge(&set, sweepjudge.Options{Header: set.Header, Decided: st.end, Finished: st.verdict})
	if err != nil {
		return Result{}, err
	}
	sub := fan.Subscribe("sweep", 4096, pipeline.Lossless)
	judged := make(chan struct{})
	go func() {
		defer close(judged)
		for ev := range sub.Events() {
			j.Add(ev)
		}
		j.End() // the stream ended inside a step: interrupted, or a source failed
	}()
	_, runErr := pipeline.Run(ctx, pipeline.Config{
		Header:  set.Header,
		Primary: []pipeline.Source{pipeline.SourceFunc(st.run)},
		Aux:     set.Aux,
		Stage:   set.Stage,
		Buffer:  set.Buffer,
	}, fan)
	<-judged

	res := ResultOf(j.Sweep())
	res.Stopped, res.Interrupted = st.stopped, st.interrupted
	if set.Progress != nil {
		set.Progress(Progress{Result: res, Done: true})
	}
	return res, runErr
}

// stepper is the sweep's primary source: it runs the steps in sequence.
type stepper struct {
	set      *settings
	verdicts chan Step // from the judge, one per step; buffered so it never waits

	mu     sync.Mutex
	index  int // the running step, 0 between steps
	cancel context.CancelCauseFunc

	// Why the sweep ended, and whether ctx ended it; read after the
	// pipeline has returned.
	stopped     string
	interrupted bool
}

// errWallClock ends a step whose events stopped coming: the rules run on
// event time, so without events only the wall clock can end it.
var errWallClock = fmt.Errorf("no decision within step max on the wall clock (did the source stop emitting?): %w", pipeline.ErrRunEnded)

// decision is the cause a step is cancelled with once it is decided. It is
// the run's own end to the probe (pipeline.ErrRunEnded), so the requests it
// cuts are counted as cancelled by the step's end, not as failures, in the
// summary and in a report of the sweep's recording.
type decision struct{ reason string }

func (d decision) Error() string { return d.reason }
func (d decision) Unwrap() error { return pipeline.ErrRunEnded }

// run runs the steps between a rules marker and an ended marker, so a
// recording carries what a report needs to judge the steps again and say
// why the sweep stopped.
func (s *stepper) run(ctx context.Context, emit func(event.Event)) error {
	emit(sweepjudge.RulesMarker(s.set.Now(), s.set.Rules))
	if err := s.runSteps(ctx, emit); err != nil {
		return err
	}
	emit(sweepjudge.EndedMarker(s.set.Now(), s.stopped, s.interrupted))
	return nil
}

func (s *stepper) runSteps(ctx context.Context, emit func(event.Event)) error {
	var steps []Step
	for {
		if ctx.Err() != nil {
			s.stopped, s.interrupted = "interrupted before step "+strconv.Itoa(len(steps)+1), true
			return nil
		}
		spec, ok, why := s.set.Plan.next(steps)
		if !ok {
			s.stopped = why
			return nil
		}
		spec.Index = len(steps) + 1
		src, err := s.set.Step(spec)
		if err != nil {
			return fmt.Errorf("sweep step %d (%s): %w", spec.Index, spec.Load, err)
		}
		step, err := s.runStep(ctx, spec, src, emit)
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			s.stopped, s.interrupted = fmt.Sprintf("interrupted during step %d (%s)", spec.Index, spec.Load), true
			return nil
		}
		steps = append(steps, step)
		emit(sweepjudge.ResultMarker(s.set.Now(), step))
	}
}

// runStep runs one step's source until the judge ends it (or it ends by
// itself), then waits for the judge's verdict.
func (s *stepper) runStep(ctx context.Context, spec StepSpec, src pipeline.Source, emit func(event.Event)) (Step, error) {
	stepCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	backstop := time.AfterFunc(s.set.StepMax+max(s.set.StepMax/2, 10*time.Second), func() { cancel(errWallClock) })
	defer backstop.Stop()

	s.mu.Lock()
	s.index, s.cancel = spec.Index, cancel
	s.mu.Unlock()
	emit(sweepjudge.StartMarker(s.set.Now(), spec))
	var records atomic.Int64
	err := src.Run(stepCtx, func(ev event.Event) {
		if ev.Request != nil {
			records.Add(1)
		}
		emit(ev)
	})
	s.mu.Lock()
	s.index, s.cancel = 0, nil
	s.mu.Unlock()

	cause := "its source ended by itself"
	if c := context.Cause(stepCtx); c != nil {
		cause = c.Error()
	}
	interrupted := ctx.Err() != nil
	if interrupted {
		cause = "interrupted"
	}
	emit(sweepjudge.EndMarker(s.set.Now(), spec, records.Load(), cause, interrupted))
	if err != nil {
		return Step{}, fmt.Errorf("sweep step %d (%s): %w", spec.Index, spec.Load, err)
	}
	select {
	case step := <-s.verdicts:
		return step, nil
	case <-ctx.Done():
		return Step{}, nil
	}
}

// verdict takes the judge's result of the step that ended; the stepper
// waits for it before planning the next step.
func (s *stepper) verdict(step Step) {
	select {
	case s.verdicts <- step:
	default: // the stepper was interrupted and is not waiting
	}
}

// end cancels step index if it is still running.
func (s *stepper) end(index int, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.index == index && s.cancel != nil {
		s.cancel(decision{reason})
	}
}
