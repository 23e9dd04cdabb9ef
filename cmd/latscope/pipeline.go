package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/collector"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
)

// pipeline is one measuring session, wired the one way data flows:
//
//	runner (probe) ─┐
//	prometheus  ────┼─► raw ─► attributor ─► aggregator ─► status line / final report
//	gpu         ────┘
//
// Sources only emit; the attributor joins server timings onto request
// records; the aggregator is the one place statistics are computed.
type pipeline struct {
	runner     *probe.Runner
	collectors []collector.Collector
	spans      collector.SpanLookup // nil without an OTLP receiver
	joinWait   time.Duration
	offered    float64 // open-loop rate, for the queue-growth insight
	status     io.Writer
	statusRate time.Duration
}

// result is what a finished session produced.
type result struct {
	summary aggregate.Summary
	stats   probe.RunStats
}

// run drives the session until the runner stops (duration, request count
// or ctx), then drains every stage so that no record is lost: the final
// summary holds every request that was sent, Ctrl-C included.
func (p *pipeline) run(ctx context.Context) (result, error) {
	raw := make(chan event.Event, 4096)
	attributed := make(chan event.Event, 4096)
	// Records must never be dropped, so emit blocks; the stages below drain
	// until their input closes, not until ctx ends, so a Ctrl-C still
	// delivers the cancelled requests' records.
	emit := func(ev event.Event) { raw <- ev }
	drainCtx := context.WithoutCancel(ctx)

	attributor := collector.NewAttributor(collector.AttributorConfig{Spans: p.spans, JoinWait: p.joinWait})
	go attributor.Run(drainCtx, raw, attributed)

	agg := aggregate.New(aggregate.Config{Now: time.Now, OfferedRate: p.offered})
	summaryc := make(chan aggregate.Summary, 1)
	var lastStatus time.Time
	publish := func(s aggregate.Snapshot) {
		if p.status == nil || time.Since(lastStatus) < p.statusRate {
			return
		}
		lastStatus = time.Now()
		fmt.Fprintln(p.status, aggregate.StatusLine(s))
	}
	go func() { summaryc <- agg.Run(drainCtx, attributed, 250*time.Millisecond, publish) }()

	collectCtx, stopCollectors := context.WithCancel(ctx)
	var sources sync.WaitGroup
	for _, c := range p.collectors {
		sources.Add(1)
		go func() {
			defer sources.Done()
			// A collector's failure is its own state (markers, stale
			// samples); it never stops the probe.
			_ = c.Run(collectCtx, emit)
		}()
	}

	stats, runErr := p.runner.Run(ctx, emit)

	// Give late server spans a moment to arrive for the last requests.
	if p.spans != nil && ctx.Err() == nil && p.joinWait > 0 {
		select {
		case <-time.After(p.joinWait):
		case <-ctx.Done():
		}
	}
	stopCollectors()
	sources.Wait()
	close(raw)
	summary := <-summaryc
	return result{summary: summary, stats: stats}, runErr
}

