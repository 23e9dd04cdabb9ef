package sim

import (
	"runtime"
	"time"
)

// Go's timers end any sleep shorter than about 1 ms after about 1.05 ms on
// Linux, and overshoot longer ones by 0.1-0.3 ms. pause therefore sleeps
// only when the cost is long enough, for all but a short tail, and spins
// (yielding) through the tail and through short costs: small nominal costs
// stay small, and long ones do not burn a core.
const (
	spinTail     = 200 * time.Microsecond
	minSleepCost = 1200 * time.Microsecond
)

// pause waits about d. Callers measure the real elapsed time themselves.
func pause(d time.Duration) {
	if d <= 0 {
		return
	}
	start := time.Now()
	if d >= minSleepCost {
		time.Sleep(d - spinTail)
	}
	for time.Since(start) < d {
		runtime.Gosched()
	}
}

// pauseFrom waits until d has passed since start, so real work done since
// start counts towards the nominal cost: a stage costs max(d, real work).
func pauseFrom(start time.Time, d time.Duration) {
	pause(d - time.Since(start))
}
