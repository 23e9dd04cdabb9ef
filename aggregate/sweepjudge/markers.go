package sweepjudge

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// MarkerSource is the Source of the markers a sweep puts into its stream,
// three per step (a note each), so a recording carries the steps:
//
//	start:  "step 3: 12 req/s"                       values step, phase 1, rate or concurrency, refine
//	end:    "step 3 ended: steady (...)"             values step, phase 2, requests, interrupted
//	result: "step 3: 11.9 ok/s, TTFT p99 241 ms, …"  values step, phase 3, ok_per_s, ttft_p99_ms, pass
//
// The end marker's requests is how many request records the step's source
// emitted: a reader has the whole step once it has seen that many.
//
// Two more notes, without a step, bracket the sweep, so a report of its
// recording can judge the steps as the live sweep did (Recorded) and say
// why it stopped:
//
//	rules:  "sweep rules: warm-up 5s, window 10s, …"  values sweep 1, warmup_s, window_s, step_max_s, interval_s, tolerance, min_growth, stop_errors
//	ended:  "sweep ended: <why it stopped>"         values sweep 2, interrupted
const MarkerSource = "sweep"

// Marker value keys and phases.
const (
	keyStep        = "step"
	keyPhase       = "phase"
	keyRefine      = "refine"
	keyRequests    = "requests"
	keyInterrupted = "interrupted"

	phaseStart  = 1
	phaseEnd    = 2
	phaseResult = 3

	// keySweep marks the notes about the whole sweep (no step key, so a
	// judge passes them by), with these values.
	keySweep   = "sweep"
	sweepRules = 1
	sweepEnded = 2
)

// The rules marker's value keys.
const (
	keyWarmup     = "warmup_s"
	keyWindow     = "window_s"
	keyStepMax    = "step_max_s"
	keyInterval   = "interval_s"
	keyTolerance  = "tolerance"
	keyMinGrowth  = "min_growth"
	keyStopErrors = "stop_errors"
)

// RulesMarker records the rules the steps are judged by (the SLO is the
// session header's).
func RulesMarker(t time.Time, set Rules) event.Event {
	return note(t, fmt.Sprintf("sweep rules: warm-up %s, window %s, step max %s, interval %s, tolerance %g%%, min growth %g, stop errors %g%%",
		set.Warmup, set.Window, set.StepMax, set.Interval, 100*set.Tolerance, set.MinGrowth, 100*set.StopErrors),
		map[string]float64{
			keySweep: sweepRules, keyWarmup: set.Warmup.Seconds(), keyWindow: set.Window.Seconds(), keyStepMax: set.StepMax.Seconds(),
			keyInterval: set.Interval.Seconds(), keyTolerance: set.Tolerance, keyMinGrowth: set.MinGrowth, keyStopErrors: set.StopErrors,
		})
}

// EndedMarker records why the sweep stopped.
func EndedMarker(t time.Time, stopped string, interrupted bool) event.Event {
	return note(t, "sweep ended: "+stopped, map[string]float64{keySweep: sweepEnded, keyInterrupted: flag(interrupted)})
}

// sweepNote reads a rules or ended marker: its kind (sweepRules,
// sweepEnded), or 0 for any other event.
func sweepNote(ev event.Event) (int, *event.Marker) {
	m := ev.Marker
	if m == nil || m.Source != MarkerSource || m.Values == nil {
		return 0, nil
	}
	switch k := m.Values[keySweep]; k {
	case sweepRules, sweepEnded:
		return int(k), m
	}
	return 0, nil
}

// rulesOf reads the rules back from a rules marker; the seconds are
// rounded to the microsecond, as they were written from durations.
func rulesOf(m *event.Marker, slo []aggregate.Objective) Rules {
	d := func(key string) time.Duration {
		return time.Duration(math.Round(m.Values[key]*1e6)) * time.Microsecond
	}
	return Rules{SLO: slo, Warmup: d(keyWarmup), Window: d(keyWindow), StepMax: d(keyStepMax), Interval: d(keyInterval),
		Tolerance: m.Values[keyTolerance], MinGrowth: m.Values[keyMinGrowth], StopErrors: m.Values[keyStopErrors]}
}

func note(t time.Time, msg string, values map[string]float64) event.Event {
	return event.NewMarker(&event.Marker{Time: t, Kind: event.MarkerNote, Source: MarkerSource, Message: msg, Values: values})
}

func flag(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// StartMarker marks the start of the step spec.
func StartMarker(t time.Time, spec StepSpec) event.Event {
	msg := fmt.Sprintf("step %d: %s", spec.Index, spec.Load)
	if spec.Refine {
		msg += " (refining)"
	}
	return note(t, msg, map[string]float64{
		keyStep: float64(spec.Index), keyPhase: phaseStart, keyRefine: flag(spec.Refine),
		string(spec.Load.Mode): spec.Load.Value,
	})
}

// EndMarker marks the end of the step spec: its source stopped, having
// emitted records request records, for cause.
func EndMarker(t time.Time, spec StepSpec, records int64, cause string, interrupted bool) event.Event {
	return note(t, fmt.Sprintf("step %d ended: %s", spec.Index, cause), map[string]float64{
		keyStep: float64(spec.Index), keyPhase: phaseEnd, keyRequests: float64(records), keyInterrupted: flag(interrupted),
	})
}

// ResultMarker marks the step's result, for a reader of the stream.
func ResultMarker(t time.Time, s Step) event.Event {
	verdict := "not steady"
	switch {
	case s.Saturated:
		verdict = "saturated"
	case s.ErrorsOver:
		verdict = "too many errors"
	case s.Steady:
		verdict = "steady"
	}
	pass := "failed"
	if s.Pass {
		pass = "passed"
	}
	if s.Failed != "" {
		verdict = s.Failed
	}
	values := map[string]float64{
		keyStep: float64(s.Index), keyPhase: phaseResult,
		"ok_per_s": s.Throughput, "pass": flag(s.Pass),
	}
	// A TTFT the step did not measure is left out, not marked as 0.
	ttft := "TTFT p99 -"
	if s.TTFT.Count > 0 {
		ttft = fmt.Sprintf("TTFT p99 %.1f ms", s.TTFT.P99)
		values["ttft_p99_ms"] = s.TTFT.P99
	}
	return note(t, fmt.Sprintf("step %d: %s offered, %.1f ok/s, %s, %s, %s", s.Index, s.Load, s.Throughput, ttft, verdict, pass), values)
}

// stepMarker is a sweep marker as read back from the stream.
type stepMarker struct {
	phase       int
	spec        StepSpec
	requests    int64
	interrupted bool
	cause       string
}

// parseMarker reads a sweep marker; false for any other event.
func parseMarker(ev event.Event) (stepMarker, bool) {
	m := ev.Marker
	if m == nil || m.Source != MarkerSource || m.Values == nil {
		return stepMarker{}, false
	}
	step, phase := m.Values[keyStep], m.Values[keyPhase]
	if step < 1 || step != math.Trunc(step) {
		return stepMarker{}, false
	}
	out := stepMarker{phase: int(phase), spec: StepSpec{Index: int(step)}}
	switch out.phase {
	case phaseStart:
		out.spec.Refine = m.Values[keyRefine] == 1
		for _, mode := range []Mode{OpenLoop, ClosedLoop} {
			if v, ok := m.Values[string(mode)]; ok {
				out.spec.Load = Load{Mode: mode, Value: v}
			}
		}
		if out.spec.Load.Mode == "" {
			return stepMarker{}, false
		}
	case phaseEnd:
		out.requests = int64(m.Values[keyRequests])
		out.interrupted = m.Values[keyInterrupted] == 1
		out.cause = m.Message
		if _, cause, ok := strings.Cut(m.Message, "ended: "); ok {
			out.cause = cause
		}
	case phaseResult:
	default:
		return stepMarker{}, false
	}
	return out, true
}
