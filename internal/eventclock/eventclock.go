// Package eventclock stamps one source's events so that their times never
// go back. Consumers show a source's events in the order they arrive, so a
// wall clock stepped back (NTP) or two goroutines racing to emit must not
// put an earlier time after a later one. The collectors and the attributor
// (its own markers) both stamp with it.
package eventclock

import "time"

// Clock stamps one source's events. Not safe for concurrent use: a source
// that emits from several goroutines stamps and emits under one lock.
type Clock struct {
	now  func() time.Time
	last time.Time
}

// New returns a Clock that reads now.
func New(now func() time.Time) Clock { return Clock{now: now} }

// Now reads the clock and stamps the reading.
func (c *Clock) Now() time.Time { return c.Stamp(c.now()) }

// Stamp returns t, or the last time stamped if t is before it. Wall times
// are compared, as they are what a recording keeps.
func (c *Clock) Stamp(t time.Time) time.Time {
	if t.Round(0).Before(c.last.Round(0)) {
		return c.last
	}
	c.last = t
	return t
}
