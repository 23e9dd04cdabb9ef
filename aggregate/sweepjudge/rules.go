package sweepjudge

import (
	"fmt"
	"time"

	"github.com/latscope/latscope/aggregate"
)

// Defaults for Rules' zero fields. A step takes at least Warmup+Window.
const (
	DefaultWarmup     = 5 * time.Second
	DefaultWindow     = 10 * time.Second
	DefaultStepMax    = time.Minute
	DefaultInterval   = time.Second
	DefaultTolerance  = 0.1
	DefaultMinGrowth  = 4
	DefaultStopErrors = 0.05
)

// Rules are what a step is judged by; a sweep records them in its stream
// (RulesMarker), so a recording is judged again as the live sweep was.
type Rules struct {
	// SLO are the objectives a step must meet to pass; with latency
	// objectives each step also counts goodput.
	SLO []aggregate.Objective
	// Warmup is kept out of every step's statistics: its first seconds,
	// while the server's batch fills.
	Warmup time.Duration
	// Window is the stretch over which a step must hold still to count as
	// steady, and the least it is measured.
	Window time.Duration
	// StepMax ends a step that has not settled, in event time.
	StepMax time.Duration
	// Interval is how often, in event time, the steadiness rule is applied
	// and progress published.
	Interval time.Duration
	// Tolerance is how far a trend may move over the window, relative to
	// its level, and still count as flat (0.1: 10%).
	Tolerance float64
	// MinGrowth is the least change of a backlog (queue depth, requests in
	// flight) over the window that counts as growth: a tolerance floor for
	// queues that sit near zero.
	MinGrowth float64
	// StopErrors is the error rate past which a step fails and the sweep
	// stops (0.05: 5%).
	StopErrors float64
}

// ttftFloorMS keeps a TTFT of a few milliseconds from being held to a
// tolerance of a fraction of one: the least TTFT change that counts,
// whatever the tolerance.
const ttftFloorMS = 2.0

// Fill fills in the zero fields with their defaults and checks the rules.
func (r Rules) Fill() (Rules, error) {
	fill := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	fill(&r.Warmup, DefaultWarmup)
	fill(&r.Window, DefaultWindow)
	fill(&r.StepMax, DefaultStepMax)
	fill(&r.Interval, DefaultInterval)
	if r.Tolerance == 0 {
		r.Tolerance = DefaultTolerance
	}
	if r.MinGrowth == 0 {
		r.MinGrowth = DefaultMinGrowth
	}
	if r.StopErrors == 0 {
		r.StopErrors = DefaultStopErrors
	}
	switch {
	case r.Warmup < 0 || r.Window < 0 || r.Interval < 0:
		return Rules{}, fmt.Errorf("sweep: warm-up %s, window %s, interval %s: want 0 or more", r.Warmup, r.Window, r.Interval)
	case r.StepMax < r.Warmup+r.Window:
		return Rules{}, fmt.Errorf("sweep: step max %s: want at least warm-up + window (%s)", r.StepMax, r.Warmup+r.Window)
	case !(r.Tolerance > 0 && r.Tolerance < 1):
		return Rules{}, fmt.Errorf("sweep: tolerance %v: want between 0 and 1", r.Tolerance)
	case !(r.MinGrowth > 0):
		return Rules{}, fmt.Errorf("sweep: min growth %v: want more than 0", r.MinGrowth)
	case !(r.StopErrors > 0 && r.StopErrors <= 1):
		return Rules{}, fmt.Errorf("sweep: stop errors %v: want a share above 0 and at most 1", r.StopErrors)
	}
	return r, nil
}
