package session

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/latscope/latscope/agent"
	"github.com/latscope/latscope/collector"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/internal/fileread"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/tracefile"
)

// Spec is a session as a command line gives it, in the units a person
// writes (lengths as "512" or "512:128", steps as "4,8,16", a trace's
// path): Options checks it, every error naming the flag to change, and
// turns it into the session's Options.
type Spec struct {
	Target                 string
	Dialect, Model, APIKey string
	Headers                []string // "Name: value"
	CACert                 string
	Insecure               bool
	// HTTP2 speaks HTTP/2 over TLS (ALPN h2), H2C without TLS (prior
	// knowledge); either spreads the streams over Connections.
	HTTP2, H2C  bool
	Connections int

	Concurrency      int
	Rate             float64
	Arrival          string
	Burstiness       float64
	Duration         time.Duration
	Requests, Warmup int
	Drain            time.Duration
	UntilStopped     bool // with neither Duration nor Requests, run until stopped (else 30 s)
	PromptTokens     string
	OutputTokens     string
	PromptFile       string
	SharedPrefix     int
	Conversation     string
	CancelAfter      string
	Timeout          time.Duration
	MaxEventBytes    int
	Seed             int64
	SeedDrawn        bool
	Shard            probe.Shard
	StartAt          time.Time
	Steps            string
	StepDuration     time.Duration
	RepeatSteps      bool
	Trace            string
	TraceSpeed       float64

	SLO, TTFTBasis string        // for the session header
	FlushTimeout   time.Duration // checked here: a load flag of run's

	MetricsURL     string
	NoMetrics      bool
	ScrapeInterval time.Duration
	OTLPListen     string
	JoinWait       time.Duration
	GPUDevices     string
	GPUMetricsURLs []string
	GPUInterval    time.Duration
	NoGPU          bool

	Version string // latscope's

	// What checking reads from the strings above.
	loadSteps []probe.LoadStep
	traceLoad *probe.Trace
	conv      probe.Conversation
	cancel    probe.CancelPolicy
}

// Options checks the spec and turns it into the session's options; the
// connection's warnings (--insecure) go to stderr.
func (s Spec) Options(stderr io.Writer) (Options, error) {
	return s.options(stderr)
}

// validate checks what flag parsing alone cannot, so that every error a
// user sees names the flag to change.
func (f *Spec) validate() error {
	if err := f.validateLoad(); err != nil {
		return err
	}
	steps, err := parseSteps(f.Steps, f.StepDuration)
	if err != nil {
		return err
	}
	if len(steps) > 0 && f.Rate > 0 {
		return errors.New("--steps is a stepped closed loop: give --steps or --rate, not both")
	}
	f.loadSteps = steps
	if err := f.readTrace(); err != nil {
		return err
	}
	if err := f.readSessions(); err != nil {
		return err
	}
	switch {
	case f.Timeout < 0:
		return fmt.Errorf("--timeout %s: want 0 (no limit) or more", f.Timeout)
	case f.MaxEventBytes < 1 || f.MaxEventBytes > probe.MaxEventBytesLimit:
		return fmt.Errorf("--max-event-bytes %d: want 1 to %d", f.MaxEventBytes, probe.MaxEventBytesLimit)
	case f.SharedPrefix < 0:
		return fmt.Errorf("--shared-prefix %d: want 0 or more tokens", f.SharedPrefix)
	case f.JoinWait < 0:
		return fmt.Errorf("--otlp-join-wait %s: want 0 or more", f.JoinWait)
	case !f.NoMetrics && f.ScrapeInterval <= 0:
		return fmt.Errorf("--scrape-interval %s: want more than 0", f.ScrapeInterval)
	case !f.NoGPU && f.GPUInterval <= 0:
		return fmt.Errorf("--gpu-interval %s: want more than 0", f.GPUInterval)
	}
	if f.Duration == 0 && f.Requests == 0 && !f.UntilStopped && f.traceLoad == nil {
		f.Duration = 30 * time.Second // a trace ends by itself
	}
	return nil
}

// readTrace reads --trace, when given, and checks it goes with the rest of
// the load flags.
func (f *Spec) readTrace() error {
	switch {
	case f.Trace == "":
		return nil
	case f.Rate > 0 || len(f.loadSteps) > 0:
		return errors.New("--trace is its own schedule: give --trace, or --rate or --steps, not both")
	case f.PromptFile != "":
		return errors.New("--trace sets the prompt lengths: give --trace or --prompt-file, not both")
	case !(f.TraceSpeed > 0) || math.IsInf(f.TraceSpeed, 0):
		return fmt.Errorf("--trace-speed %g: want a positive factor (1: as recorded)", f.TraceSpeed)
	}
	t, err := tracefile.Read(f.Trace)
	if err != nil {
		return fmt.Errorf("--trace: %w", err)
	}
	f.traceLoad = t
	return nil
}

// readSessions reads --conversation and --cancel-after.
func (f *Spec) readSessions() error {
	if f.Conversation != "" {
		c, err := probe.ParseConversation(f.Conversation)
		if err != nil {
			return fmt.Errorf("--conversation: %w", err)
		}
		if f.traceLoad != nil {
			return errors.New("--trace is its own schedule: give --conversation or --trace, not both")
		}
		f.conv = c
	}
	if f.CancelAfter != "" {
		p, err := probe.ParseCancelAfter(f.CancelAfter)
		if err != nil {
			return fmt.Errorf("--cancel-after: %w", err)
		}
		f.cancel = p
	}
	return nil
}

// traceRate is the rate --trace offers, in requests per second.
func (f *Spec) traceRate() float64 {
	t := f.traceLoad
	if t == nil || len(t.Requests) < 2 || t.Duration() <= 0 {
		return 0
	}
	return float64(len(t.Requests)-1) / t.Duration().Seconds() * f.TraceSpeed
}

// validateLoad checks the flags that shape the load.
func (f *Spec) validateLoad() error {
	switch {
	case f.Concurrency < 1:
		return fmt.Errorf("--concurrency %d: want 1 or more", f.Concurrency)
	case math.IsNaN(f.Rate) || math.IsInf(f.Rate, 0) || f.Rate < 0:
		return fmt.Errorf("--rate %g: want a number of requests per second (0: closed loop)", f.Rate)
	case f.Arrival != probe.ArrivalPoisson && f.Arrival != probe.ArrivalConstant && f.Arrival != probe.ArrivalGamma:
		return fmt.Errorf("--arrival %q: want poisson, constant or gamma", f.Arrival)
	case !(f.Burstiness > 0) || math.IsInf(f.Burstiness, 0):
		return fmt.Errorf("--burstiness %g: want a positive number (1 = poisson, below 1 burstier, above 1 smoother)", f.Burstiness)
	case f.Burstiness != 1 && f.Arrival != probe.ArrivalGamma:
		return fmt.Errorf("--burstiness %g: applies to --arrival gamma only", f.Burstiness)
	case f.Duration < 0:
		return fmt.Errorf("--duration %s: want a positive duration", f.Duration)
	case f.FlushTimeout < 0: // 0: the default
		return fmt.Errorf("--flush-timeout %s: want a positive duration", f.FlushTimeout)
	case f.Drain < 0:
		return fmt.Errorf("--drain %s: want 0 or more", f.Drain)
	case f.Requests < 0 || f.Warmup < 0:
		return errors.New("--requests and --warmup must not be negative")
	}
	return nil
}

func parseIndices(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q: want comma-separated GPU indices like 0,2", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseSteps reads --steps: comma-separated concurrencies, each for d.
func parseSteps(spec string, d time.Duration) ([]probe.LoadStep, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	if d <= 0 {
		return nil, fmt.Errorf("--step-duration %s: want a positive duration", d)
	}
	var steps []probe.LoadStep
	for _, part := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 || n > 100000 {
			return nil, fmt.Errorf("--steps %q: want concurrencies from 1 up, e.g. 4,8,16", spec)
		}
		steps = append(steps, probe.LoadStep{Concurrency: n, Duration: d})
	}
	return steps, nil
}

// options turns the spec into the session's options.
func (f *Spec) options(stderr io.Writer) (Options, error) {
	target := f.Target
	if err := f.validate(); err != nil {
		return Options{}, err
	}
	promptLen, err := probe.ParseLength(f.PromptTokens)
	if err != nil {
		return Options{}, fmt.Errorf("--prompt-tokens: %w", err)
	}
	outputLen, err := probe.ParseLength(f.OutputTokens)
	if err != nil {
		return Options{}, fmt.Errorf("--output-tokens: %w", err)
	}
	gpuIdx, err := parseIndices(f.GPUDevices)
	if err != nil {
		return Options{}, fmt.Errorf("--gpu: %w", err)
	}
	conn, err := f.connect(stderr, target)
	if err != nil {
		return Options{}, err
	}
	o := Options{
		Conn: conn, Dialect: f.Dialect, Model: f.Model, Version: f.Version,
		Prompts: probe.PromptConfig{
			ShortestPrompt: f.traceLoad.ShortestPrompt(), // 0 without a trace
			PromptTokens:   promptLen, OutputTokens: outputLen, SharedPrefix: f.SharedPrefix, File: f.PromptFile,
		},
		Load: probe.LoadConfig{
			Concurrency: f.Concurrency, Rate: f.Rate, Arrival: f.Arrival, Burstiness: f.Burstiness,
			Duration: f.Duration, Drain: f.Drain, Requests: f.Requests, Warmup: f.Warmup, Seed: f.Seed, Shard: f.Shard, StartAt: f.StartAt,
			Steps: f.loadSteps, RepeatSteps: f.RepeatSteps,
			Trace: f.traceLoad, TraceSpeed: f.TraceSpeed,
			Conversation: f.conv, Cancel: f.cancel,
		},
		SeedDrawn:     f.SeedDrawn,
		LoadHeader:    f.load(),
		Offered:       f.Rate,
		MaxEventBytes: f.MaxEventBytes,
		Timeout:       f.Timeout,
		Metrics:       Metrics{Off: f.NoMetrics, URL: f.MetricsURL, Interval: f.ScrapeInterval},
		GPU:           GPU{Off: f.NoGPU, Devices: gpuIdx, ExporterURLs: collector.SplitGPUMetricsURLs(f.GPUMetricsURLs), Interval: f.GPUInterval},
		OTLPListen:    f.OTLPListen,
		JoinWait:      f.JoinWait,
	}
	if f.traceLoad != nil {
		o.Offered = f.traceRate()
	}
	return o, nil
}

// load describes the asked-for load for the session header.
func (f *Spec) load() event.Load {
	l := event.Load{
		Mode: "closed", Concurrency: f.Concurrency,
		PromptTokens: f.PromptTokens, OutputTokens: f.OutputTokens,
		Duration: f.Duration, Requests: f.Requests, Warmup: f.Warmup, SLO: f.SLO, TTFTBasis: f.TTFTBasis,
		Seed: f.Seed, SeedDrawn: f.SeedDrawn,
		Conversation: f.Conversation, CancelAfter: f.CancelAfter,
		Connections: f.h2Connections(),
	}
	switch {
	case f.HTTP2:
		l.HTTP = HTTP2
	case f.H2C:
		l.HTTP = H2C
	}
	switch {
	case f.traceLoad != nil:
		t := f.traceLoad
		l.Mode, l.Concurrency, l.Rate = "trace", 0, f.traceRate()
		l.Arrival = fmt.Sprintf("trace %s (%s, %d requests) at %gx", filepath.Base(f.Trace), t.Format, len(t.Requests), f.TraceSpeed)
	case f.Rate > 0:
		l.Mode, l.Concurrency, l.Rate, l.Arrival, l.Burstiness = "open", 0, f.Rate, f.Arrival, f.Burstiness
	case len(f.loadSteps) > 0:
		l.Mode, l.Concurrency, l.Steps = "steps", 0, f.Steps+" every "+f.StepDuration.String()
		if f.RepeatSteps {
			l.Steps += ", repeated"
		}
	}
	return l
}

// maxSetupCall bounds one call before the run (detection, /tokenize) when
// --timeout is longer or zero: a server that takes longer than this to
// list its models is not going to be measured usefully.
const maxSetupCall = 10 * time.Second

// connect checks the target and the credential and TLS flags. --insecure is
// announced on stderr: it is never silently in effect.
func (f *Spec) connect(stderr io.Writer, target string) (*Connection, error) {
	if _, err := probe.ParseBaseURL(target); err != nil {
		return nil, fmt.Errorf("--url: %w", err)
	}
	headers, err := parseHeaders(f.Headers)
	if err != nil {
		return nil, err
	}
	apiKey := f.APIKey
	if apiKey == "" {
		apiKey = os.Getenv("OPENAI_API_KEY")
	}
	auth, err := probe.AuthHeader(apiKey, headers)
	if err != nil {
		return nil, fmt.Errorf("--api-key (or $OPENAI_API_KEY): %w", err)
	}
	tlsConfig, err := loadTLS(f.CACert, f.Insecure)
	if err != nil {
		return nil, err
	}
	proto, err := f.httpVersion(target)
	if err != nil {
		return nil, err
	}
	if f.Insecure {
		fmt.Fprintln(stderr, "latscope: WARNING: --insecure: TLS certificates are NOT verified; anyone on the path can read the prompts and the API key")
	}
	return &Connection{
		Target: target, Shown: event.RedactURL(target), APIKey: apiKey, Headers: headers, Auth: auth,
		TLS: tlsConfig, Timeout: setupCallTimeout(f.Timeout),
		HTTP: proto, Connections: f.h2Connections(),
	}, nil
}

// httpVersion is the protocol HTTP2 and H2C ask for ("" for HTTP/1.1),
// checked against the target's scheme and Connections (0 where the
// command has no HTTP/2 flags: demo).
func (f *Spec) httpVersion(target string) (string, error) {
	https := strings.HasPrefix(strings.ToLower(target), "https:")
	h2 := f.HTTP2 || f.H2C
	switch {
	case f.HTTP2 && f.H2C:
		return "", errors.New("--http2 is HTTP/2 over TLS, --h2c without: give one")
	case h2 && (f.Connections < 1 || f.Connections > probe.MaxH2Connections):
		return "", fmt.Errorf("--connections %d: want 1 to %d", f.Connections, probe.MaxH2Connections)
	case f.HTTP2 && !https:
		return "", errors.New("--http2 needs an https:// URL (ALPN); for HTTP/2 without TLS give --h2c")
	case f.H2C && https:
		return "", errors.New("--h2c is HTTP/2 without TLS: give an http:// URL, or --http2 for https")
	case f.HTTP2:
		return HTTP2, nil
	case f.H2C:
		return H2C, nil
	case f.Connections > 1:
		return "", errors.New("--connections spreads HTTP/2 streams: give --http2 or --h2c (HTTP/1.1 opens a connection per concurrent stream)")
	}
	return "", nil
}

// h2Connections is Connections where HTTP/2 is spoken, else 0.
func (f *Spec) h2Connections() int {
	if f.HTTP2 || f.H2C {
		return f.Connections
	}
	return 0
}

// setupCallTimeout bounds each call before the run: --timeout, the limit
// for one request, but no more than maxSetupCall.
func setupCallTimeout(requestTimeout time.Duration) time.Duration {
	if requestTimeout <= 0 {
		return maxSetupCall
	}
	return min(requestTimeout, maxSetupCall)
}

// loadTLS builds the TLS settings of --ca-cert and --insecure; nil means the
// system's roots.
func loadTLS(caFile string, insecure bool) (*tls.Config, error) {
	switch {
	case caFile != "" && insecure:
		return nil, errors.New("--ca-cert and --insecure: give one or the other (--insecure skips the verification --ca-cert is for)")
	case insecure:
		return &tls.Config{InsecureSkipVerify: true}, nil //nolint:gosec // asked for, and announced on stderr
	case caFile == "":
		return nil, nil
	}
	pem, err := fileread.ReadFile(caFile, certLimit("--ca-cert"))
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca-cert %s: no PEM certificate in it", caFile)
	}
	return &tls.Config{RootCAs: pool}, nil
}

// parseHeaders reads the --header values ("Name: value"). Its errors
// number the flag instead of quoting it: the text may hold a credential.
func parseHeaders(raw []string) (http.Header, error) {
	h := http.Header{}
	for i, kv := range raw {
		name, value, ok := strings.Cut(kv, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" {
			return nil, fmt.Errorf(`--header number %d: want "Name: value" (not shown: it may hold a credential)`, i+1)
		}
		if err := probe.CheckHeader(name, value); err != nil {
			return nil, fmt.Errorf("--header number %d: %w", i+1, err)
		}
		h.Add(name, value)
	}
	return h, nil
}

// certLimit bounds a certificate or CA file named by flag.
func certLimit(flag string) fileread.Limit {
	return fileread.Limit{Flag: flag, Max: agent.MaxPEMBytes, What: "a certificate"}
}
