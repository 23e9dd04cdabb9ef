// Package collector holds latscope's server-side sources: each collector
// watches one thing the client cannot see (the server's Prometheus metrics,
// its traces, the GPU through NVML or its exporters' pages) and turns it
// into event records. One (Host) watches the client's own machine instead,
// whose delays are in every timing the probe takes.
//
// Every collector is a pipeline.Source. Its Run owns the collector's loop:
// it returns when its context ends, reports its own failures as events (a
// collector marker and stale samples) instead of stopping, never stops the
// probe, and calls emit from its own goroutine only.
package collector

import "github.com/latscope/latscope/pipeline"

// Every collector is a source of the pipeline.
var (
	_ pipeline.Source = (*Prom)(nil)
	_ pipeline.Source = (*OTLPReceiver)(nil)
	_ pipeline.Source = (*GPU)(nil)
	_ pipeline.Source = (*SimulatedGPU)(nil)
	_ pipeline.Source = (*GPUExporter)(nil)
	_ pipeline.Source = (*Host)(nil)
)
