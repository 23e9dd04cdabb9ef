package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/collector"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/probe"
)

// session is one measuring session, built and owned here (the composition
// root): the header, the probe as the primary source, the collectors as aux
// sources, and the attributor between them and the consumers.
//
//	probe ───────────┐
//	prometheus ──────┤                      ┌─► aggregator ─► status line / final report
//	gpu ─────────────┼─► attributor ─► fan-out
//	otlp receiver ───┘                      └─► (dashboard, recorder, agent)
type session struct {
	header     *event.Session
	primary    []pipeline.Source
	aux        []pipeline.Source
	attributor *collector.Attributor
	offered    float64 // open-loop rate, for the queue-growth insight
	closers    []func()
}

// Close releases what the session opened (idle connections), last first.
func (s *session) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// sessionExtras are what the demo adds to a session: its own collectors (a
// simulated GPU), its own span receiver and a label printed first.
type sessionExtras struct {
	collectors []pipeline.Source
	spans      *collector.OTLPReceiver
	label      string
	simulated  bool
}

// openSession checks the flags, finds out what runs at target, calibrates
// the prompts and builds every source. Progress goes to stderr.
func openSession(ctx context.Context, stderr io.Writer, target string, f *loadFlags, extra *sessionExtras) (_ *session, err error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	headers, err := parseHeaders(f.headers)
	if err != nil {
		return nil, err
	}
	promptLen, err := probe.ParseLength(f.promptTokens)
	if err != nil {
		return nil, fmt.Errorf("--prompt-tokens: %w", err)
	}
	outputLen, err := probe.ParseLength(f.outputTokens)
	if err != nil {
		return nil, fmt.Errorf("--output-tokens: %w", err)
	}
	gpuIdx, err := parseIndices(f.gpuDevices)
	if err != nil {
		return nil, fmt.Errorf("--gpu: %w", err)
	}
	apiKey := f.apiKey
	if apiKey == "" {
		apiKey = os.Getenv("OPENAI_API_KEY")
	}
	if extra != nil && extra.label != "" {
		fmt.Fprintln(stderr, extra.label)
	}

	s := &session{offered: f.rate}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	// Detection and prompt calibration get their own connections, so the
	// probe's requests open theirs and time the TCP handshake: the connect
	// RTT is the network estimate in the breakdown.
	setup := &http.Client{Transport: probe.NewTransport()}
	s.closers = append(s.closers, setup.CloseIdleConnections)
	hc := &http.Client{Transport: probe.NewTransport()}
	s.closers = append(s.closers, hc.CloseIdleConnections)

	dialect, model := f.dialect, f.model
	server := "unknown"
	if dialect == "auto" || model == "" {
		det, err := probe.Detect(ctx, probe.Endpoint{BaseURL: target, HTTPClient: setup})
		if err != nil {
			if dialect == "auto" {
				return nil, fmt.Errorf("find out what server runs at %s: %w (name one with --dialect)", event.RedactURL(target), err)
			}
		} else {
			server = det.Server
			if dialect == "auto" {
				dialect = det.Dialect
			}
			if model == "" && len(det.Models) > 0 {
				model = det.Models[0]
			}
		}
	}
	fmt.Fprintf(stderr, "latscope: target %s (server %s, dialect %s, model %q)\n", event.RedactURL(target), server, dialect, model)

	var tok probe.Tokenizer
	if t, err := probe.DetectTokenizer(ctx, probe.Endpoint{BaseURL: target, HTTPClient: setup}, model); err == nil {
		tok = t
	} else {
		first, _, _ := strings.Cut(err.Error(), "\n")
		fmt.Fprintf(stderr, "latscope: no usable tokenize endpoint (%s); prompt lengths are assumed ~1 token/word and corrected from usage\n", first)
	}
	prompts, err := probe.NewPromptSource(ctx, probe.PromptConfig{
		PromptTokens: promptLen, OutputTokens: outputLen, SharedPrefix: f.sharedPrefix,
		Seed: f.seed, File: f.promptFile, Tokenizer: tok,
	})
	if err != nil {
		return nil, fmt.Errorf("prepare prompts: %w", err)
	}
	client, err := probe.NewClient(probe.ClientConfig{
		BaseURL: target, Dialect: dialect, Model: model, APIKey: apiKey, Headers: headers,
		HTTPClient: hc, MaxEventBytes: f.maxEventBytes, Timeout: f.timeout,
	})
	if err != nil {
		return nil, err
	}
	runner, err := probe.NewRunner(client, probe.LoadConfig{
		Concurrency: f.concurrency, Rate: f.rate, Arrival: f.arrival, Burstiness: f.burstiness,
		Duration: f.duration, Drain: f.drain, Requests: f.requests, Warmup: f.warmup, Seed: f.seed,
	}, prompts)
	if err != nil {
		return nil, err
	}
	s.primary = append(s.primary, runner)

	metricsURL := ""
	if !f.noMetrics && !strings.HasPrefix(dialect, "ollama") {
		metricsURL = f.metricsURL
		if metricsURL == "" {
			if metricsURL, err = collector.MetricsURLFor(target); err != nil {
				return nil, err
			}
		}
		prom, err := collector.NewProm(collector.PromConfig{URL: metricsURL, Interval: f.scrapeInterval, Model: model})
		if err != nil {
			return nil, fmt.Errorf("--metrics-url: %w", err)
		}
		s.aux = append(s.aux, prom)
	}
	var spans *collector.OTLPReceiver
	if extra != nil {
		s.aux = append(s.aux, extra.collectors...)
		spans = extra.spans
	}
	if !f.noGPU && (extra == nil || len(extra.collectors) == 0) {
		gpu := collector.NewGPU(collector.GPUConfig{Interval: f.gpuInterval, Devices: gpuIdx})
		_, line := gpu.Probe()
		fmt.Fprintln(stderr, "latscope:", line)
		s.aux = append(s.aux, gpu)
	}
	if f.otlpListen != "" && spans == nil {
		spans = collector.NewOTLPReceiver(collector.OTLPConfig{Addr: f.otlpListen})
	}
	if spans != nil {
		s.aux = append(s.aux, spans)
	}
	s.attributor = collector.NewAttributor(collector.AttributorConfig{JoinSpans: spans != nil, JoinWait: f.joinWait})

	host, _ := os.Hostname()
	s.header = &event.Session{
		Time: time.Now(), Latscope: version, RunID: runner.RunID(), Name: host, Host: host,
		Target: event.RedactURL(target), MetricsURL: event.RedactURL(metricsURL),
		Server: server, Dialect: dialect, Model: model,
		Simulated: server == probe.ServerLatscopeSim || extra != nil && extra.simulated,
		Load:      f.load(),
	}
	return s, nil
}

// load describes the asked-for load for the session header.
func (f *loadFlags) load() event.Load {
	l := event.Load{
		Mode: "closed", Concurrency: f.concurrency,
		PromptTokens: f.promptTokens, OutputTokens: f.outputTokens,
		Duration: f.duration, Requests: f.requests, Warmup: f.warmup, SLO: f.slo,
	}
	if f.rate > 0 {
		l.Mode, l.Concurrency, l.Rate, l.Arrival, l.Burstiness = "open", 0, f.rate, f.arrival, f.burstiness
	}
	return l
}

// measure runs the session's pipeline with the aggregator and the status
// line as consumers and returns the whole run's summary. Every request the
// probe sent is in it, Ctrl-C included.
func (s *session) measure(ctx context.Context, status io.Writer) (aggregate.Summary, error) {
	fan := pipeline.NewFanout()
	aggSub := fan.Subscribe("aggregator", 4096, pipeline.Lossless)
	agg := aggregate.New(aggregate.Config{Now: time.Now, OfferedRate: s.offered})
	var lastStatus time.Time
	publish := func(snap aggregate.Snapshot) {
		if status == nil || time.Since(lastStatus) < time.Second {
			return
		}
		lastStatus = time.Now()
		fmt.Fprintln(status, aggregate.StatusLine(snap))
	}
	summaryc := make(chan aggregate.Summary, 1)
	// The aggregator drains its subscription to the end, so it is not
	// stopped by ctx: the fan-out closes it after the last event.
	go func() {
		summaryc <- agg.Run(context.WithoutCancel(ctx), aggSub.Events(), aggregate.DefaultEvery, publish)
	}()

	err := pipeline.Run(ctx, pipeline.Config{Header: s.header, Primary: s.primary, Aux: s.aux, Stage: s.attributor}, fan)
	return <-summaryc, err
}
