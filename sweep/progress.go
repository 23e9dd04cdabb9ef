package sweep

import "github.com/latscope/latscope/aggregate/sweepjudge"

// Progress is the sweep so far, for a dashboard. It is a value: nothing in
// it changes after it is published.
type Progress struct {
	// Result covers the finished steps, with the max load, knee and
	// saturation drawn from them so far.
	Result Result
	// Current is the running step (nil between steps and once done).
	Current *Live
	// Done is set on the last Progress of a sweep.
	Done bool
}

// The types the sweep shares with its judge (package aggregate/sweepjudge,
// which measures the steps), named here too so that a caller of the sweep
// needs one import.
type (
	// Mode says how a sweep sets the load.
	Mode = sweepjudge.Mode
	// Load is one step's load: requests per second or streams.
	Load = sweepjudge.Load
	// StepSpec is one step as the caller's Step function is asked to build it.
	StepSpec = sweepjudge.StepSpec
	// Step is one step's result.
	Step = sweepjudge.Step
	// Phase is where a running step is.
	Phase = sweepjudge.Phase
	// Live is the running step.
	Live = sweepjudge.Live
)

// The modes and phases.
const (
	OpenLoop   = sweepjudge.OpenLoop
	ClosedLoop = sweepjudge.ClosedLoop

	PhaseWarmup    = sweepjudge.PhaseWarmup
	PhaseMeasuring = sweepjudge.PhaseMeasuring
	PhaseCoolDown  = sweepjudge.PhaseCoolDown
)
