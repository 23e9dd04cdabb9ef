package session

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
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

// Options are what a session measures and how, already checked and parsed.
type Options struct {
	Conn *Connection
	// Dialect is "auto" or a dialect's name; Model "" asks the server.
	Dialect, Model string
	// Version is latscope's, for the session header.
	Version string

	// Prompts are the prompts' lengths and source; Open sets the seed and
	// the tokenizer.
	Prompts probe.PromptConfig
	// Load is the load; its Seed is the session's seed (SeedDrawn: drawn
	// for this run, not given).
	Load      probe.LoadConfig
	SeedDrawn bool
	// LoadHeader describes the load in the session header.
	LoadHeader event.Load
	// Offered is the open-loop rate the queue-growth insight compares with.
	Offered float64

	MaxEventBytes int
	Timeout       time.Duration // one request, send to end of stream

	Metrics Metrics
	GPU     GPU
	// OTLPListen, when set, receives the server's spans there; JoinWait is
	// how long a request waits for its span.
	OTLPListen string
	JoinWait   time.Duration
	// Watch says the session watches the server's own traffic (OpenWatch,
	// OpenCanary): a span that joins none of latscope's requests is then
	// one of the server's users' and becomes a record of its own.
	Watch bool

	// Extras are what a simulated session (the demo) adds; nil otherwise.
	Extras *Extras
}

// Metrics says where the server's Prometheus metrics are scraped.
type Metrics struct {
	Off      bool
	URL      string // "": derived from the target
	Interval time.Duration
}

// GPU says where the GPUs are read: the local NVML library, or exporters.
type GPU struct {
	Off          bool
	Devices      []int    // NVML devices; nil: all
	ExporterURLs []string // dcgm or AMD exporters instead of NVML
	Interval     time.Duration
}

// Extras are what the demo adds to a session: its own collectors (a
// simulated GPU), its own span receiver and a label printed first.
type Extras struct {
	Collectors []pipeline.Source
	Spans      *collector.OTLPReceiver
	Label      string
	Simulated  bool
}

// Session is one measuring session, built by Open: the header, the probe
// as the primary source, the collectors as aux sources, and the attributor
// between them and the consumers.
type Session struct {
	Header     *event.Session
	Client     *probe.Client
	Prompts    *probe.PromptSource // as calibrated, for more runners (WithNonce)
	Primary    []pipeline.Source
	Aux        []pipeline.Source
	Attributor *attribute.Attributor
	Offered    float64 // open-loop rate, for the queue-growth insight

	current atomic.Pointer[probe.Runner]
	slots   *collector.SlotWatch // the abandoned requests' slot release (--cancel-after); nil without
	closers []func()
}

// ErrSetupInterrupted ends a session that Ctrl-C stopped before its run
// began.
var ErrSetupInterrupted = errors.New("interrupted before the run started")

// Open finds out what runs at the target, calibrates the prompts and
// builds every source; progress lines go to progress. Every call it makes
// to the server has the connection's deadline, and cancelling ctx ends it
// with an error wrapping ErrSetupInterrupted.
func Open(ctx context.Context, progress io.Writer, o Options) (_ *Session, err error) {
	if o.Extras != nil && o.Extras.Label != "" {
		fmt.Fprintln(progress, o.Extras.Label)
	}
	s := &Session{Offered: o.Offered}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	conn := o.Conn
	// Detection and prompt calibration get their own connections, so the
	// probe's requests open theirs and time the TCP handshake: the connect
	// RTT is the network estimate in the breakdown.
	setup := probe.NewHTTPClient(conn.TLS)
	s.closers = append(s.closers, setup.CloseIdleConnections)
	hc, err := conn.probeClient()
	if err != nil {
		return nil, fmt.Errorf("set up the probe's connections: %w", err)
	}
	s.closers = append(s.closers, hc.CloseIdleConnections)
	ep := conn.Endpoint(setup)

	id, err := identify(ctx, conn, ep, o.Dialect, o.Model)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "latscope: target %s (server %s, dialect %s, model %q)\n", conn.Shown, id.server, id.dialect, id.model)
	seed := o.Load.Seed
	if o.SeedDrawn {
		fmt.Fprintf(progress, "latscope: seed %d, drawn for this run: its prompts differ from other runs' (--seed %d repeats them)\n", seed, seed)
	}
	// The shards of a fleet draw one schedule between them (same seed), but
	// their own prompts: identical prompts from every agent would let a
	// server's prefix cache serve all but the first.
	pc := o.Prompts
	pc.Seed = seed + int64(o.Load.Shard.Index)
	if s.Prompts, err = preparePrompts(ctx, progress, ep, id.model, pc); err != nil {
		return nil, err
	}
	if s.Client, err = probe.NewClient(probe.ClientConfig{
		BaseURL: conn.Target, Dialect: id.dialect, Model: id.model, APIKey: conn.APIKey, Headers: conn.Headers,
		HTTPClient: hc, MaxEventBytes: o.MaxEventBytes, Timeout: o.Timeout,
	}); err != nil {
		return nil, fmt.Errorf("set up the probe: %w", err)
	}
	metricsURL, err := s.addCollectors(ctx, progress, o, id)
	if err != nil {
		return nil, err
	}
	load := o.Load
	if s.slots != nil {
		load.SlotWatch = s.slots
	}
	runner, err := probe.NewRunner(s.Client, load, s.Prompts)
	if err != nil {
		return nil, fmt.Errorf("set up the load: %w", err)
	}
	s.Primary = append(s.Primary, runner)
	s.current.Store(runner)

	host, _ := os.Hostname()
	s.Header = &event.Session{
		Time: time.Now(), Latscope: o.Version, RunID: runner.RunID(), Name: host, Host: host,
		Target: conn.Shown, MetricsURL: event.RedactURL(metricsURL),
		Server: id.server, Dialect: id.dialect, Model: id.model,
		Simulated: probe.IsLatscopeSim(id.server) || o.Extras != nil && o.Extras.Simulated,
		Load:      o.LoadHeader,
	}
	return s, nil
}

// addCollectors builds the aux sources (the server's metrics, the GPUs,
// the client host, the span receiver) and the attributor; it returns the
// metrics URL scraped ("" for none).
func (s *Session) addCollectors(ctx context.Context, progress io.Writer, o Options, id identity) (metricsURL string, err error) {
	if !o.Metrics.Off && !strings.HasPrefix(id.dialect, "ollama") {
		if metricsURL, err = s.addProm(o, id); err != nil {
			return "", err
		}
	}
	var spans *collector.OTLPReceiver
	if o.Extras != nil {
		s.Aux = append(s.Aux, o.Extras.Collectors...)
		spans = o.Extras.Spans
	}
	if !o.GPU.Off && (o.Extras == nil || len(o.Extras.Collectors) == 0) {
		gpu, err := gpuCollector(ctx, progress, o.GPU)
		if err != nil {
			return "", err
		}
		s.Aux = append(s.Aux, gpu)
	}
	s.Aux = append(s.Aux, hostCollectors()...)
	if o.OTLPListen != "" && spans == nil {
		spans = collector.NewOTLPReceiver(collector.OTLPConfig{Addr: o.OTLPListen})
	}
	if spans != nil {
		s.Aux = append(s.Aux, spans)
	}
	s.Attributor = attribute.NewAttributor(s.attributorConfig(o, id, spans != nil))
	return metricsURL, nil
}

// attributorConfig is the attributor's configuration for o: in a watch,
// the spans no request of latscope's claims are its users'. With no load
// of its own (no primary source yet) they go out at once; beside a
// canary, whose client may finish after the server exported its span,
// they wait as long as a request waits for its span.
func (s *Session) attributorConfig(o Options, id identity, spans bool) attribute.AttributorConfig {
	cfg := attribute.AttributorConfig{JoinSpans: spans, JoinWait: o.JoinWait, Server: id.server}
	if o.Watch && spans {
		cfg.UserSpans = true
		if o.Load.Rate > 0 || o.Load.Concurrency > 0 {
			cfg.UserSpanWait = cmp.Or(o.JoinWait, attribute.DefaultJoinWait)
		}
	}
	return cfg
}

// addProm adds the Prometheus collector of the server's metrics page.
func (s *Session) addProm(o Options, id identity) (string, error) {
	metricsURL := o.Metrics.URL
	if metricsURL == "" {
		var err error
		if metricsURL, err = collector.MetricsURLFor(o.Conn.Target); err != nil {
			return "", fmt.Errorf("--url: %w", err)
		}
	}
	// The scrape carries the request credentials (a gateway may guard
	// /metrics too) and knows the probe's requests in flight, to tell a
	// busy server from one that was busy before the run.
	u, client, err := o.Conn.scrape(metricsURL)
	if err != nil {
		return "", err
	}
	s.closers = append(s.closers, client.CloseIdleConnections)
	prom, err := collector.NewProm(collector.PromConfig{URL: u, HTTPClient: client, Interval: o.Metrics.Interval,
		Model: id.model, OwnInFlight: s.InFlight})
	if err != nil {
		return "", fmt.Errorf("--metrics-url: %w", err)
	}
	s.Aux = append(s.Aux, prom)
	if o.Load.Cancel.Active() {
		// The abandoned requests' slots are watched on a scraper of
		// their own, polled only while a release is awaited.
		fast, err := collector.NewProm(collector.PromConfig{URL: u, HTTPClient: client, Timeout: time.Second, Model: id.model})
		if err != nil {
			return "", fmt.Errorf("--metrics-url: %w", err)
		}
		if s.slots, err = collector.NewSlotWatch(collector.SlotWatchConfig{Prom: fast, Live: s.InFlight}); err != nil {
			return "", err
		}
	}
	return metricsURL, nil
}

// Close releases what the session opened (idle connections), last first.
func (s *Session) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// InFlight is how many requests the session's current runner has in
// flight (a sweep changes runners from step to step).
func (s *Session) InFlight() int {
	if r := s.current.Load(); r != nil {
		return r.InFlight()
	}
	return 0
}

// SetRunner makes r the runner InFlight asks (a sweep's step).
func (s *Session) SetRunner(r *probe.Runner) { s.current.Store(r) }

// PipelineConfig is the session's wiring for pipeline.Run.
func (s *Session) PipelineConfig() pipeline.Config {
	return pipeline.Config{Header: s.Header, Primary: s.Primary, Aux: s.Aux, Stage: s.Attributor}
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

// gpuCollector reads the GPUs from the exporters g names, or else from the
// local NVML library, and says on progress what it found.
func gpuCollector(ctx context.Context, progress io.Writer, g GPU) (pipeline.Source, error) {
	if len(g.ExporterURLs) == 0 {
		gpu := collector.NewGPU(collector.GPUConfig{Interval: g.Interval, Devices: g.Devices})
		_, line := gpu.Probe()
		fmt.Fprintln(progress, "latscope:", line)
		return gpu, nil
	}
	if g.Devices != nil {
		return nil, errors.New("--gpu picks local NVML devices; with --gpu-metrics-url the exporters say which GPUs there are")
	}
	gpu, err := collector.NewGPUExporter(collector.GPUExporterConfig{URLs: g.ExporterURLs, Interval: g.Interval})
	if err != nil {
		return nil, fmt.Errorf("--gpu-metrics-url: %w", err)
	}
	_, line := gpu.Probe(ctx)
	fmt.Fprintln(progress, "latscope:", line)
	return gpu, nil
}

// interrupted reports ctx's end as ErrSetupInterrupted, saying what was
// under way.
func interrupted(ctx context.Context, doing string) error {
	if ctx.Err() == nil {
		return nil
	}
	return fmt.Errorf("%w (while %s)", ErrSetupInterrupted, doing)
}
