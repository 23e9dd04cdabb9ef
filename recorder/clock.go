package recorder

import "time"

// Clock is the time source of the writer's flushes and of Replay's pacing.
// Tests inject a fake one, so nothing waits for the wall clock.
type Clock interface {
	Now() time.Time
	// After sends the time on the returned channel once d has passed.
	After(d time.Duration) <-chan time.Time
}

// systemClock is the real clock, used when no Clock is given.
type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func clockOrSystem(c Clock) Clock {
	if c == nil {
		return systemClock{}
	}
	return c
}
