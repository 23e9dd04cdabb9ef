package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/latscope/latscope/attribute"
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
	client     *probe.Client
	prompts    *probe.PromptSource // as calibrated, for more runners (WithNonce)
	current    atomic.Pointer[probe.Runner]
	primary    []pipeline.Source
	aux        []pipeline.Source
	attributor *attribute.Attributor
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
// the prompts and builds every source. Progress goes to stderr. Every call
// it makes to the server has a deadline (see setupCallTimeout), and
// cancelling ctx ends it with an error wrapping errSetupInterrupted.
func openSession(ctx context.Context, stderr io.Writer, target string, f *loadFlags, extra *sessionExtras) (_ *session, err error) {
	if err := f.validate(); err != nil {
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
	conn, err := f.connect(stderr, target)
	if err != nil {
		return nil, err
	}
	if extra != nil && extra.label != "" {
		fmt.Fprintln(stderr, extra.label)
	}

	s := &session{offered: f.rate}
	if f.traceLoad != nil {
		s.offered = f.traceRate()
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	// Detection and prompt calibration get their own connections, so the
	// probe's requests open theirs and time the TCP handshake: the connect
	// RTT is the network estimate in the breakdown.
	setup := probe.NewHTTPClient(conn.tls)
	s.closers = append(s.closers, setup.CloseIdleConnections)
	hc := probe.NewHTTPClient(conn.tls)
	s.closers = append(s.closers, hc.CloseIdleConnections)
	ep := conn.endpoint(setup)

	id, err := identify(ctx, conn, ep, f.dialect, f.model)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "latscope: target %s (server %s, dialect %s, model %q)\n", conn.shown, id.server, id.dialect, id.model)
	seed := f.seed.value()
	// The shards of a fleet draw one schedule between them (same seed), but
	// their own prompts: identical prompts from every agent would let a
	// server's prefix cache serve all but the first.
	promptSeed := seed + int64(f.shard.Index)
	if f.seed.drawn {
		fmt.Fprintf(stderr, "latscope: seed %d, drawn for this run: its prompts differ from other runs' (--seed %d repeats them)\n", seed, seed)
	}

	prompts, err := preparePrompts(ctx, stderr, ep, id.model, probe.PromptConfig{
		ShortestPrompt: f.traceLoad.ShortestPrompt(), // 0 without a trace

		PromptTokens: promptLen, OutputTokens: outputLen, SharedPrefix: f.sharedPrefix,
		Seed: promptSeed, File: f.promptFile,
	})
	if err != nil {
		return nil, err
	}
	s.prompts = prompts
	client, err := probe.NewClient(probe.ClientConfig{
		BaseURL: target, Dialect: id.dialect, Model: id.model, APIKey: conn.apiKey, Headers: conn.headers,
		HTTPClient: hc, MaxEventBytes: f.maxEventBytes, Timeout: f.timeout,
	})
	if err != nil {
		return nil, fmt.Errorf("set up the probe: %w", err)
	}
	s.client = client
	runner, err := probe.NewRunner(client, probe.LoadConfig{
		Concurrency: f.concurrency, Rate: f.rate, Arrival: f.arrival, Burstiness: f.burstiness,
		Duration: f.duration, Drain: f.drain, Requests: f.requests, Warmup: f.warmup, Seed: seed, Shard: f.shard, StartAt: f.startAt,
		Steps: f.loadSteps, RepeatSteps: f.repeatSteps,
		Trace: f.traceLoad, TraceSpeed: f.traceSpeed,
	}, prompts)
	if err != nil {
		return nil, fmt.Errorf("set up the load: %w", err)
	}
	s.primary = append(s.primary, runner)
	s.current.Store(runner)

	metricsURL := ""
	if !f.noMetrics && !strings.HasPrefix(id.dialect, "ollama") {
		metricsURL = f.metricsURL
		if metricsURL == "" {
			if metricsURL, err = collector.MetricsURLFor(target); err != nil {
				return nil, fmt.Errorf("--url: %w", err)
			}
		}
		// The scrape carries the request credentials (a gateway may guard
		// /metrics too) and knows the probe's requests in flight, to tell a
		// busy server from one that was busy before the run.
		scrape, err := conn.scrape(metricsURL)
		if err != nil {
			return nil, err
		}
		s.closers = append(s.closers, scrape.client.CloseIdleConnections)
		prom, err := collector.NewProm(collector.PromConfig{URL: scrape.url, HTTPClient: scrape.client, Interval: f.scrapeInterval,
			Model: id.model, OwnInFlight: s.inFlight})
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
		gpu, err := f.gpuCollector(ctx, stderr, gpuIdx)
		if err != nil {
			return nil, err
		}
		s.aux = append(s.aux, gpu)
	}
	s.aux = append(s.aux, hostCollectors()...)
	if f.otlpListen != "" && spans == nil {
		spans = collector.NewOTLPReceiver(collector.OTLPConfig{Addr: f.otlpListen})
	}
	if spans != nil {
		s.aux = append(s.aux, spans)
	}
	s.attributor = attribute.NewAttributor(attribute.AttributorConfig{JoinSpans: spans != nil, JoinWait: f.joinWait, Server: id.server})

	host, _ := os.Hostname()
	s.header = &event.Session{
		Time: time.Now(), Latscope: version, RunID: runner.RunID(), Name: host, Host: host,
		Target: conn.shown, MetricsURL: event.RedactURL(metricsURL),
		Server: id.server, Dialect: id.dialect, Model: id.model,
		Simulated: probe.IsLatscopeSim(id.server) || extra != nil && extra.simulated,
		Load:      f.load(),
	}
	return s, nil
}

// hostCollectors is the client host's collector on Linux (none elsewhere:
// it reads /proc): its CPU pressure is in every timing, and the aggregator
// names the host's pauses instead of the server.
func hostCollectors() []pipeline.Source {
	if runtime.GOOS != "linux" {
		return nil
	}
	return []pipeline.Source{collector.NewHost(collector.HostConfig{})}
}

// gpuCollector reads the GPUs from the exporters --gpu-metrics-url names,
// or else from the local NVML library, and says on stderr what it found.
func (f *loadFlags) gpuCollector(ctx context.Context, stderr io.Writer, devices []int) (pipeline.Source, error) {
	urls := collector.SplitGPUMetricsURLs(f.gpuMetricsURLs)
	if len(urls) == 0 {
		gpu := collector.NewGPU(collector.GPUConfig{Interval: f.gpuInterval, Devices: devices})
		_, line := gpu.Probe()
		fmt.Fprintln(stderr, "latscope:", line)
		return gpu, nil
	}
	if f.gpuDevices != "" {
		return nil, errors.New("--gpu picks local NVML devices; with --gpu-metrics-url the exporters say which GPUs there are")
	}
	gpu, err := collector.NewGPUExporter(collector.GPUExporterConfig{URLs: urls, Interval: f.gpuInterval})
	if err != nil {
		return nil, fmt.Errorf("--gpu-metrics-url: %w", err)
	}
	_, line := gpu.Probe(ctx)
	fmt.Fprintln(stderr, "latscope:", line)
	return gpu, nil
}

// errSetupInterrupted ends a session that Ctrl-C stopped before its run began.
var errSetupInterrupted = errors.New("interrupted before the run started")

// interrupted reports ctx's end as errSetupInterrupted, saying what was under way.
func interrupted(ctx context.Context, doing string) error {
	if ctx.Err() == nil {
		return nil
	}
	return fmt.Errorf("%w (while %s)", errSetupInterrupted, doing)
}

// identity is what the session measures: the server kind, the dialect and
// the model.
type identity struct {
	server, dialect, model string
}

// identify settles the dialect and model: as given, or asked of the server.
// With --dialect auto, a server that cannot be identified is an error that
// says why; with a named dialect that needs a model and no --model, so is a
// server that lists none.
func identify(ctx context.Context, conn *connection, ep probe.Endpoint, dialect, model string) (identity, error) {
	id := identity{server: "unknown", dialect: dialect, model: model}
	if dialect != "auto" && model != "" {
		return id, nil
	}
	det, err := probe.Detect(ctx, ep)
	if ierr := interrupted(ctx, "finding out what server runs at "+conn.shown); ierr != nil {
		return id, ierr
	}
	if err == nil {
		id.server = det.Server
		if id.dialect == "auto" {
			id.dialect = det.Dialect
		}
		if id.model == "" && len(det.Models) > 0 {
			id.model = det.Models[0]
		}
	}
	switch {
	case err != nil && dialect == "auto":
		return id, fmt.Errorf("find out what server runs at %s: %w%s", conn.shown, err, detectHint(err))
	case id.model != "" || !probe.DialectNeedsModel(id.dialect):
		return id, nil
	case err != nil:
		return id, fmt.Errorf("--dialect %s needs a model: none given with --model, and the server's model list could not be read: %w%s",
			id.dialect, err, detectHint(err))
	}
	if dialect == "auto" {
		return id, fmt.Errorf("the %s server at %s lists no model; give one with --model", id.server, conn.shown)
	}
	return id, fmt.Errorf("--dialect %s needs a model: none given with --model, and the server lists none; give one with --model", id.dialect)
}

// detectHint says what the user can do about a failed detection, where a
// flag can help.
func detectHint(err error) string {
	switch {
	case errors.Is(err, probe.ErrUnauthorized):
		return " (give the key with --api-key or --header)"
	case errors.Is(err, probe.ErrNoAnswer):
		return " (raise --timeout if the server is only slow)"
	case errors.Is(err, probe.ErrUnknownServer):
		return " (name the API with --dialect, and --model)"
	}
	return ""
}

// preparePrompts builds the prompt source, calibrated with the server's
// tokenize endpoint when it has one. A tokenizer that fails, before or
// during calibration, is not fatal: lengths are then assumed (~1 token per
// word) and corrected from the usage the server reports, and a line says so.
func preparePrompts(ctx context.Context, stderr io.Writer, ep probe.Endpoint, model string, cfg probe.PromptConfig) (*probe.PromptSource, error) {
	const assumed = "prompt lengths are assumed ~1 token/word and corrected from usage"
	tok, err := probe.DetectTokenizer(ctx, ep, model)
	if ierr := interrupted(ctx, "looking for a tokenize endpoint"); ierr != nil {
		return nil, ierr
	}
	if err != nil {
		first, _, _ := strings.Cut(err.Error(), "\n")
		fmt.Fprintf(stderr, "latscope: no usable tokenize endpoint (%s); %s\n", first, assumed)
	} else {
		cfg.Tokenizer = tok
	}
	prompts, err := probe.NewPromptSource(ctx, cfg)
	if ierr := interrupted(ctx, "calibrating the prompts"); ierr != nil {
		return nil, ierr
	}
	if errors.Is(err, probe.ErrTokenizer) {
		fmt.Fprintf(stderr, "latscope: the tokenize endpoint failed during calibration (%v); %s\n", err, assumed)
		cfg.Tokenizer = nil
		prompts, err = probe.NewPromptSource(ctx, cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("prepare prompts: %w", err)
	}
	return prompts, nil
}

// load describes the asked-for load for the session header.
func (f *loadFlags) load() event.Load {
	l := event.Load{
		Mode: "closed", Concurrency: f.concurrency,
		PromptTokens: f.promptTokens, OutputTokens: f.outputTokens,
		Duration: f.duration, Requests: f.requests, Warmup: f.warmup, SLO: f.slo, TTFTBasis: f.ttftBasis,
		Seed: f.seed.value(), SeedDrawn: f.seed.drawn,
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

// inFlight is how many requests the session's current runner has in
// flight (a sweep changes runners from step to step).
func (s *session) inFlight() int {
	if r := s.current.Load(); r != nil {
		return r.InFlight()
	}
	return 0
}

// pipelineConfig is the session's wiring for pipeline.Run.
func (s *session) pipelineConfig() pipeline.Config {
	return pipeline.Config{Header: s.header, Primary: s.primary, Aux: s.aux, Stage: s.attributor}
}
