package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/latscope/latscope/collector"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/session"
)

// openSession checks the flags and opens the session they ask for (see
// package session): progress goes to stderr, and cancelling ctx ends it
// with an error wrapping session.ErrSetupInterrupted.
func openSession(ctx context.Context, stderr io.Writer, target string, f *loadFlags, extra *session.Extras) (*session.Session, error) {
	o, err := f.sessionOptions(stderr, target)
	if err != nil {
		return nil, err
	}
	o.Extras = extra
	return session.Open(ctx, stderr, o)
}

// sessionOptions turns the flags into the session's options.
func (f *loadFlags) sessionOptions(stderr io.Writer, target string) (session.Options, error) {
	if err := f.validate(); err != nil {
		return session.Options{}, err
	}
	promptLen, err := probe.ParseLength(f.promptTokens)
	if err != nil {
		return session.Options{}, fmt.Errorf("--prompt-tokens: %w", err)
	}
	outputLen, err := probe.ParseLength(f.outputTokens)
	if err != nil {
		return session.Options{}, fmt.Errorf("--output-tokens: %w", err)
	}
	gpuIdx, err := parseIndices(f.gpuDevices)
	if err != nil {
		return session.Options{}, fmt.Errorf("--gpu: %w", err)
	}
	conn, err := f.connect(stderr, target)
	if err != nil {
		return session.Options{}, err
	}
	o := session.Options{
		Conn: conn, Dialect: f.dialect, Model: f.model, Version: version,
		Prompts: probe.PromptConfig{
			ShortestPrompt: f.traceLoad.ShortestPrompt(), // 0 without a trace
			PromptTokens:   promptLen, OutputTokens: outputLen, SharedPrefix: f.sharedPrefix, File: f.promptFile,
		},
		Load: probe.LoadConfig{
			Concurrency: f.concurrency, Rate: f.rate, Arrival: f.arrival, Burstiness: f.burstiness,
			Duration: f.duration, Drain: f.drain, Requests: f.requests, Warmup: f.warmup, Seed: f.seed.value(), Shard: f.shard, StartAt: f.startAt,
			Steps: f.loadSteps, RepeatSteps: f.repeatSteps,
			Trace: f.traceLoad, TraceSpeed: f.traceSpeed,
			Conversation: f.conv, Cancel: f.cancel,
		},
		SeedDrawn:     f.seed.drawn,
		LoadHeader:    f.load(),
		Offered:       f.rate,
		MaxEventBytes: f.maxEventBytes,
		Timeout:       f.timeout,
		Metrics:       session.Metrics{Off: f.noMetrics, URL: f.metricsURL, Interval: f.scrapeInterval},
		GPU:           session.GPU{Off: f.noGPU, Devices: gpuIdx, ExporterURLs: collector.SplitGPUMetricsURLs(f.gpuMetricsURLs), Interval: f.gpuInterval},
		OTLPListen:    f.otlpListen,
		JoinWait:      f.joinWait,
	}
	if f.traceLoad != nil {
		o.Offered = f.traceRate()
	}
	return o, nil
}

// load describes the asked-for load for the session header.
func (f *loadFlags) load() event.Load {
	l := event.Load{
		Mode: "closed", Concurrency: f.concurrency,
		PromptTokens: f.promptTokens, OutputTokens: f.outputTokens,
		Duration: f.duration, Requests: f.requests, Warmup: f.warmup, SLO: f.slo, TTFTBasis: f.ttftBasis,
		Seed: f.seed.value(), SeedDrawn: f.seed.drawn,
		Conversation: f.conversation, CancelAfter: f.cancelAfter,
		Connections: f.h2Connections(),
	}
	switch {
	case f.http2:
		l.HTTP = session.HTTP2
	case f.h2c:
		l.HTTP = session.H2C
	}
	switch {
	case f.traceLoad != nil:
		t := f.traceLoad
		l.Mode, l.Concurrency, l.Rate = "trace", 0, f.traceRate()
		l.Arrival = fmt.Sprintf("trace %s (%s, %d requests) at %gx", filepath.Base(f.trace), t.Format, len(t.Requests), f.traceSpeed)
	case f.rate > 0:
		l.Mode, l.Concurrency, l.Rate, l.Arrival, l.Burstiness = "open", 0, f.rate, f.arrival, f.burstiness
	case len(f.loadSteps) > 0:
		l.Mode, l.Concurrency, l.Steps = "steps", 0, f.steps+" every "+f.stepDuration.String()
		if f.repeatSteps {
			l.Steps += ", repeated"
		}
	}
	return l
}
