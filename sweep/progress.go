package sweep

import (
	"time"

	"github.com/latscope/latscope/aggregate"
)

// Phase is where a running step is.
type Phase string

// The phases of a step.
const (
	PhaseWarmup    Phase = "warm-up"      // kept out of the statistics
	PhaseMeasuring Phase = "measuring"    // waiting for the step to settle
	PhaseCoolDown  Phase = "cooling down" // decided; its requests in flight are being cut off
)

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
