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

	"github.com/latscope/latscope/event"
)

// Collector is a source of server-side events.
type Collector interface {
	// Run collects until ctx ends, passing each event to emit. emit is called
	// from Run's goroutine only.
	Run(ctx context.Context, emit func(event.Event)) error
}
