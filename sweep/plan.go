package sweep

import (
	"fmt"
	"math"

	"github.com/latscope/latscope/aggregate/sweepjudge"
)

// Limits on a plan, so a typo cannot start a sweep of thousands of steps.
const (
	maxPlanSteps = 64
	maxRefine    = 10
	// minRefineRatio ends the bisection of rates once the bracket is this
	// narrow: finer steps than 2% cannot be told apart from noise.
	minRefineRatio = 1.02
)

// Plan is the loads a sweep runs: a geometric series (Start, Start·Factor,
// ... up to Max) or an explicit list, then up to Refine more steps that
// bisect between the highest load that passed and the lowest above it that
// failed. The coarse steps end early once a step saturates the server or
// passes the error limit.
type Plan struct {
	Mode Mode
	// Loads lists the coarse loads, ascending; when empty the series
	// Start, Start·Factor, ... up to Max is used.
	Loads              []float64
	Start, Factor, Max float64
	// Refine is how many bisection steps follow the coarse ones (0: none).
	Refine int
}

// Validate checks the plan.
func (p Plan) Validate() error {
	if p.Mode != OpenLoop && p.Mode != ClosedLoop {
		return fmt.Errorf("sweep plan: mode %q: want %q or %q", p.Mode, OpenLoop, ClosedLoop)
	}
	if p.Refine < 0 || p.Refine > maxRefine {
		return fmt.Errorf("sweep plan: refine %d: want 0 to %d", p.Refine, maxRefine)
	}
	if len(p.Loads) > 0 {
		return p.validateList()
	}
	switch {
	case !(p.Start > 0) || math.IsInf(p.Start, 0):
		return fmt.Errorf("sweep plan: start %v: want more than 0", p.Start)
	case !(p.Factor > 1) || math.IsInf(p.Factor, 0):
		return fmt.Errorf("sweep plan: factor %v: want more than 1", p.Factor)
	case !(p.Max >= p.Start) || math.IsInf(p.Max, 0):
		return fmt.Errorf("sweep plan: max %v: want at least the start (%v)", p.Max, p.Start)
	case p.Mode == ClosedLoop && p.Start < 1:
		return fmt.Errorf("sweep plan: start %v: want at least 1 stream", p.Start)
	}
	if n := len(p.coarse()); n > maxPlanSteps {
		return fmt.Errorf("sweep plan: %d steps from %v to %v by %v: want at most %d (raise the factor or lower the max)", n, p.Start, p.Max, p.Factor, maxPlanSteps)
	}
	return nil
}

func (p Plan) validateList() error {
	if len(p.Loads) > maxPlanSteps {
		return fmt.Errorf("sweep plan: %d loads: want at most %d", len(p.Loads), maxPlanSteps)
	}
	for i, v := range p.Loads {
		switch {
		case !(v > 0) || math.IsInf(v, 0):
			return fmt.Errorf("sweep plan: load %v: want more than 0", v)
		case p.Mode == ClosedLoop && v != math.Trunc(v):
			return fmt.Errorf("sweep plan: concurrency %v: want a whole number", v)
		case i > 0 && v <= p.Loads[i-1]:
			return fmt.Errorf("sweep plan: loads %v: want them ascending", p.Loads)
		}
	}
	return nil
}

// coarse returns the plan's coarse loads. In closed loop the series is
// rounded to whole streams, each at least one more than the last.
func (p Plan) coarse() []Load {
	if len(p.Loads) > 0 {
		out := make([]Load, len(p.Loads))
		for i, v := range p.Loads {
			out[i] = Load{Mode: p.Mode, Value: v}
		}
		return out
	}
	var out []Load
	// The tolerance keeps Max itself in the series despite rounding
	// (25·2·2·2 may come out a hair above 200).
	limit := p.Max * (1 + 1e-9)
	for v, prev := p.Start, 0.0; v <= limit && len(out) <= maxPlanSteps; v *= p.Factor {
		value := sweepjudge.RoundLoad(v)
		if p.Mode == ClosedLoop {
			value = max(math.Round(v), prev+1)
			if value > limit {
				break
			}
			v = value
		}
		out = append(out, Load{Mode: p.Mode, Value: value})
		prev = value
	}
	return out
}

// midpoint returns the load halfway between lo and hi (geometrically for
// rates), or false when the bracket is too narrow to split.
func (p Plan) midpoint(lo, hi float64) (Load, bool) {
	if p.Mode == ClosedLoop {
		mid := math.Floor((lo + hi) / 2)
		if mid <= lo || mid >= hi {
			return Load{}, false
		}
		return Load{Mode: ClosedLoop, Value: mid}, true
	}
	if hi/lo < minRefineRatio {
		return Load{}, false
	}
	mid := sweepjudge.RoundLoad(math.Sqrt(lo * hi))
	if mid <= lo || mid >= hi {
		return Load{}, false
	}
	return Load{Mode: OpenLoop, Value: mid}, true
}

// next returns the next step to run after steps (in the order they ran),
// or false and why the sweep ends. The coarse loads run in order until one
// stops the sweep (saturated, too many errors) or they run out; then up to
// Refine steps bisect between the highest load that passed and the lowest
// one that failed.
func (p Plan) next(steps []Step) (StepSpec, bool, string) {
	coarse := p.coarse()
	var nCoarse, nRefine int
	for _, s := range steps {
		if s.Refine {
			nRefine++
		} else {
			nCoarse++
		}
	}
	// A step without a successful request measured nothing: the server
	// is down or refuses everything, so no load above or between is
	// worth sending to it.
	if f := firstFailed(steps); f != nil {
		return StepSpec{}, false, failure(f)
	}
	stopped := len(steps) > 0 && steps[len(steps)-1].StopsSweep()
	if nRefine == 0 && !stopped && nCoarse < len(coarse) {
		return StepSpec{Load: coarse[nCoarse]}, true, ""
	}
	why := coarseEnd(steps)
	if nRefine >= p.Refine {
		return StepSpec{}, false, why
	}
	best, fail := boundary(steps)
	if best < 0 || fail < 0 {
		return StepSpec{}, false, why
	}
	lo, hi := steps[best].Load, steps[fail].Load
	mid, ok := p.midpoint(lo.Value, hi.Value)
	if !ok {
		return StepSpec{}, false, fmt.Sprintf("%s; refined to between %s and %s", why, lo, hi)
	}
	return StepSpec{Load: mid, Refine: true}, true, ""
}

// firstFailed returns the first step, in the order they ran, without a
// successful request, or nil.
func firstFailed(steps []Step) *Step {
	for i := range steps {
		if steps[i].Failed != "" {
			return &steps[i]
		}
	}
	return nil
}

// failure names the step and why it failed.
func failure(s *Step) string {
	return fmt.Sprintf("step %d (%s): %s", s.Index, s.Load, s.Failed)
}

// coarseEnd says why the coarse steps ended.
func coarseEnd(steps []Step) string {
	var last *Step
	for i := range steps {
		if !steps[i].Refine {
			last = &steps[i]
		}
	}
	switch {
	case last == nil:
		return "the plan has no steps"
	case last.Saturated:
		return fmt.Sprintf("step %d (%s) saturated the server", last.Index, last.Load)
	case last.ErrorsOver:
		return fmt.Sprintf("step %d (%s) had %.1f%% errors", last.Index, last.Load, 100*last.ErrorRate)
	case last.Interrupted:
		return fmt.Sprintf("interrupted during step %d (%s)", last.Index, last.Load)
	}
	return fmt.Sprintf("the plan ended at %s", last.Load)
}

// boundary returns the indices in steps of the highest load that passed
// below the lowest load that failed, and of that failing one (-1 for
// none). Taking the boundary from below keeps a lucky pass above a failure
// from counting: every load up to the best one passed.
func boundary(steps []Step) (best, fail int) {
	best, fail = -1, -1
	for i, s := range steps {
		if !s.Interrupted && !s.Pass && (fail < 0 || s.Load.Value < steps[fail].Load.Value) {
			fail = i
		}
	}
	for i, s := range steps {
		if !s.Pass || fail >= 0 && s.Load.Value >= steps[fail].Load.Value {
			continue
		}
		if best < 0 || s.Load.Value > steps[best].Load.Value {
			best = i
		}
	}
	return best, fail
}
