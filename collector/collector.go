// Package collector holds latscope's server-side sources: each collector
// watches one thing the client cannot see (the server's Prometheus metrics,
// its traces, the GPU) and turns it into event records.
//
// Every collector implements Collector. Run owns the collector's loop: it
// returns when its context ends, reports its own failures as events (a
// collector marker and stale samples) instead of stopping, and never stops
// the probe.
package collector

import (
	"context"
	"time"

	"github.com/latscope/latscope/event"
)

// Collector is a source of server-side events.
type Collector interface {
	// Run collects until ctx ends, passing each event to emit. emit is called
	// from Run's goroutine only.
	Run(ctx context.Context, emit func(event.Event)) error
}

// eventClock stamps one source's events so that their times never go back:
// consumers show a source's events in the order they arrive, so a wall
// clock stepped back (NTP) or two goroutines racing to emit must not put an
// earlier time after a later one. Not safe for concurrent use: a source
// that emits from several goroutines stamps and emits under one lock.
type eventClock struct {
	now  func() time.Time
	last time.Time
}

// Now reads the clock and stamps the reading.
func (c *eventClock) Now() time.Time { return c.stamp(c.now()) }

// stamp returns t, or the last time stamped if t is before it. Wall times
// are compared, as they are what a recording keeps.
func (c *eventClock) stamp(t time.Time) time.Time {
	if t.Round(0).Before(c.last.Round(0)) {
		return c.last
	}
	c.last = t
	return t
}
