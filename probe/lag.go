package probe

import (
	"context"
	"time"
)

// lateBy is how much later than due a scheduling check must wake to count
// as the probe running late: Go's timers and a busy machine delay a wake-up
// by a millisecond or two all the time, which no stall is made of.
const lateBy = 5 * time.Millisecond

// WatchSchedulingLag checks every interval, until ctx ends, that the calling
// process's goroutines run on time, and calls late with each stretch in
// which they did not: from the last on-time check to the late one. When
// the probe's goroutines are held up (a starved CPU, a long GC pause), the
// streams' reads are held up with them, and their gaps are the probe's,
// not the server's. It returns when ctx ends; late is called from its
// goroutine.
func WatchSchedulingLag(ctx context.Context, interval time.Duration, late func(from, to time.Time)) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	watchLag(ctx, tick.C, time.Now, interval, late)
}

// watchLag is WatchSchedulingLag with its ticks and clock given.
func watchLag(ctx context.Context, ticks <-chan time.Time, now func() time.Time, interval time.Duration, late func(from, to time.Time)) {
	last := now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
		t := now()
		if t.Sub(last) > interval+lateBy {
			late(last, t)
		}
		last = t
	}
}
