package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The idle bench: the probe as a canary, one stream or a trickle of
// requests, beside a plain Go client doing the same against the same kind
// of server at the same time. Each client is a child process (latscope's
// own `run`, and the plain client), each against its own paced server in
// this process, and each's CPU is read from the OS (/proc) over one shared
// interval, so a minute when the host is slower slows both alike.

// Idle bench cases.
const (
	IdleC1        = "c1"        // one stream, closed loop, headless
	IdleDashboard = "dashboard" // the same, headless and with the dashboard drawing to a terminal
	IdleRate      = "rate"      // an open loop at a low rate, headless
)

// IdleCases are the idle bench's cases, in the order they run.
var IdleCases = []string{IdleC1, IdleDashboard, IdleRate}

// The idle bench's targets.
const (
	idleCPURatioTarget  = 1.5 // probe CPU per token against the plain client's, c=1
	idleDashboardTarget = 5.0 // ms of CPU per second the dashboard may add
	idleRateCPUTarget   = 2.0 // ms of CPU per second at --rate 0.2
	idleRateRSSTargetMB = 40.0
)

// IdleConfig configures RunIdle.
type IdleConfig struct {
	Cases []string
	// Duration is the measured time of the c1 and dashboard cases, and
	// RateDuration of the rate case; Warmup runs before either, unmeasured.
	Duration, RateDuration, Warmup time.Duration
	Rate                           float64 // the rate case's requests per second
	OutputTokens                   int
	// FirstToken and Interval pace the servers' streams.
	FirstToken, Interval time.Duration
	Model                string
	// Probe builds the command that runs latscope's probe with args (the
	// run subcommand's flags); Plain the one that runs the plain client
	// (PlainArgs's flags).
	Probe, Plain Launcher
	// Progress, when set, is told what is being measured.
	Progress io.Writer
	// ProfileDir, when set, is where each latscope client writes its CPU
	// profile, to DIR/CASE-CLIENT.cpu (CLIENT: headless or dashboard).
	ProfileDir string
}

// Validate reports the first setting RunIdle cannot run with.
func (c IdleConfig) Validate() error {
	for _, n := range c.Cases {
		if !slices.Contains(IdleCases, n) {
			return fmt.Errorf("unknown case %q: want one of %v", n, IdleCases)
		}
	}
	switch {
	case len(c.Cases) == 0:
		return errors.New("no case to run")
	case c.Duration < time.Second || c.RateDuration < time.Second:
		return fmt.Errorf("durations %s and %s: want at least 1s each", c.Duration, c.RateDuration)
	case c.Warmup < 0:
		return fmt.Errorf("warmup %s: want 0 or more", c.Warmup)
	case !(c.Rate > 0 && c.Rate <= 100):
		return fmt.Errorf("rate %v: want more than 0 and at most 100 requests/s", c.Rate)
	case c.OutputTokens < 1 || c.OutputTokens > 100000:
		return fmt.Errorf("output tokens %d: want 1 to 100000", c.OutputTokens)
	case c.Probe == nil || c.Plain == nil:
		return errors.New("no launcher for the clients")
	}
	return FastServer{TokensPerWrite: 1, FirstToken: c.FirstToken, Interval: c.Interval}.Validate()
}

// IdleResult is the idle bench's measurements.
type IdleResult struct {
	FirstTokenMS float64    `json:"first_token_ms"`
	IntervalMS   float64    `json:"interval_ms"`
	OutputTokens int        `json:"output_tokens"`
	Cases        []IdleCase `json:"cases"`
	Met          bool       `json:"met"`
}

// IdleCase is one case: its clients, measured over the same interval.
type IdleCase struct {
	Name    string       `json:"name"`
	Seconds float64      `json:"seconds"`
	Clients []IdleClient `json:"clients"`
	Checks  []Check      `json:"checks"`
}

// IdleClient is what one client cost over its case's interval.
type IdleClient struct {
	Name   string  `json:"name"`
	Tokens int64   `json:"tokens"` // token events its server wrote in the interval
	CPUms  float64 `json:"cpu_ms"`
	// CPUPerTokenUS is µs of CPU per token; CPUPerSecMS ms of CPU per
	// second of the interval.
	CPUPerTokenUS float64 `json:"cpu_per_token_us"`
	CPUPerSecMS   float64 `json:"cpu_ms_per_s"`
	// RSSMB is the mean of the resident set sampled every second, and
	// PeakRSSMB the process's high-water mark.
	RSSMB     float64 `json:"rss_mb"`
	PeakRSSMB float64 `json:"peak_rss_mb"`
}

// Names of the idle bench's clients.
const (
	idleProbe     = "latscope"
	idleDashboard = "latscope (dashboard)"
	idlePlain     = "plain Go client"
)

// RunIdle runs cfg's cases one after the other.
func RunIdle(ctx context.Context, cfg IdleConfig) (IdleResult, error) {
	if err := cfg.Validate(); err != nil {
		return IdleResult{}, err
	}
	if cfg.ProfileDir != "" {
		if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
			return IdleResult{}, fmt.Errorf("profile directory: %w", err)
		}
	}
	res := IdleResult{FirstTokenMS: msOf(cfg.FirstToken), IntervalMS: msOf(cfg.Interval), OutputTokens: cfg.OutputTokens, Met: true}
	for _, name := range cfg.Cases {
		c, err := runIdleCase(ctx, cfg, name)
		if err != nil {
			return res, fmt.Errorf("case %s: %w", name, err)
		}
		for _, ch := range c.Checks {
			res.Met = res.Met && ch.Met
		}
		res.Cases = append(res.Cases, c)
	}
	return res, nil
}

// idleChild is one client of a case: its process and its server.
type idleChild struct {
	name   string
	srv    *idleServer
	proc   *childProc
	before procUsage
	tokens int64
	rss    []float64
}

func runIdleCase(ctx context.Context, cfg IdleConfig, name string) (IdleCase, error) {
	measure := cfg.Duration
	if name == IdleRate {
		measure = cfg.RateDuration
	}
	// Each child runs past the measured interval; it is stopped once the
	// interval is read.
	runFor := idleStartLimit + cfg.Warmup + measure + 30*time.Second
	kids := []struct {
		name string
		tui  bool
	}{{idleProbe, false}, {idlePlain, false}}
	if name == IdleDashboard {
		kids = append(kids, struct {
			name string
			tui  bool
		}{idleDashboard, true})
	}
	var children []*idleChild
	defer func() {
		for _, ch := range children {
			ch.proc.stop()
			ch.srv.close()
		}
	}()
	for _, k := range kids {
		srv, err := startIdleServer(cfg)
		if err != nil {
			return IdleCase{}, err
		}
		ch := &idleChild{name: k.name, srv: srv}
		children = append(children, ch)
		cmd := cfg.Plain(PlainArgs(srv.url, cfg.Model, cfg.OutputTokens, idleRate(cfg, name), runFor)...)
		if k.name != idlePlain {
			args := probeArgs(srv.url, cfg.Model, cfg.OutputTokens, idleRate(cfg, name), runFor, k.tui)
			cmd = cfg.Probe(append(args, profileArgs(cfg.ProfileDir, name, k.tui)...)...)
		}
		if ch.proc, err = startChild(cmd, k.tui); err != nil {
			return IdleCase{}, fmt.Errorf("start %s: %w", k.name, err)
		}
	}
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "bench idle: %s, %s warm-up and %s measured\n", name, cfg.Warmup, measure)
	}
	if err := untilStreaming(ctx, children); err != nil {
		return IdleCase{}, err
	}
	if err := sleepCtx(ctx, cfg.Warmup); err != nil {
		return IdleCase{}, err
	}
	if err := readAll(children, func(ch *idleChild) error {
		u, err := ch.proc.usage()
		ch.before, ch.tokens = u, ch.srv.sent.Load()
		return err
	}); err != nil {
		return IdleCase{}, err
	}
	start := time.Now()
	if err := sampleRSS(ctx, children, measure); err != nil {
		return IdleCase{}, err
	}
	out := IdleCase{Name: name, Seconds: time.Since(start).Seconds()}
	for _, ch := range children {
		u, err := ch.proc.usage()
		if err != nil {
			return IdleCase{}, fmt.Errorf("%s: %w", ch.name, err)
		}
		out.Clients = append(out.Clients, ch.result(u, out.Seconds))
	}
	out.Checks = idleChecks(name, out.Clients)
	return out, nil
}

// untilStreaming waits until every child's server has sent a token: a
// dashboard takes seconds to start, a headless run a fraction of one.
func untilStreaming(ctx context.Context, children []*idleChild) error {
	deadline := time.Now().Add(idleStartLimit)
	for {
		var waiting *idleChild
		for _, ch := range children {
			if ch.srv.sent.Load() == 0 {
				waiting = ch
			}
			if _, err := ch.proc.usage(); err != nil {
				return fmt.Errorf("%s: %w", ch.name, err)
			}
		}
		if waiting == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no token streamed within %s of its start; its last words: %q",
				waiting.name, idleStartLimit, waiting.proc.stderr.String())
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// idleStartLimit bounds how long a client may take to stream its first
// token.
const idleStartLimit = time.Minute

func idleRate(cfg IdleConfig, name string) float64 {
	if name == IdleRate {
		return cfg.Rate
	}
	return 0
}

func readAll(children []*idleChild, f func(*idleChild) error) error {
	for _, ch := range children {
		if err := f(ch); err != nil {
			return fmt.Errorf("%s: %w", ch.name, err)
		}
	}
	return nil
}

// sampleRSS waits out the measured interval, noting each child's resident
// set every second.
func sampleRSS(ctx context.Context, children []*idleChild, measure time.Duration) error {
	end := time.Now().Add(measure)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		wait := time.Until(end)
		if wait <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
			return nil
		case <-tick.C:
			for _, ch := range children {
				if u, err := ch.proc.usage(); err == nil {
					ch.rss = append(ch.rss, u.rssMB)
				}
			}
		}
	}
}

func (ch *idleChild) result(after procUsage, seconds float64) IdleClient {
	tokens := ch.srv.sent.Load() - ch.tokens
	cpu := after.cpu - ch.before.cpu
	c := IdleClient{Name: ch.name, Tokens: tokens, CPUms: msOf(cpu), PeakRSSMB: after.peakMB, RSSMB: after.rssMB}
	if len(ch.rss) > 0 {
		sum := 0.0
		for _, r := range ch.rss {
			sum += r
		}
		c.RSSMB = sum / float64(len(ch.rss))
	}
	if tokens > 0 {
		c.CPUPerTokenUS = float64(cpu.Microseconds()) / float64(tokens)
	}
	if seconds > 0 {
		c.CPUPerSecMS = c.CPUms / seconds
	}
	return c
}

// idleChecks are a case's targets, judged on its clients.
func idleChecks(name string, cs []IdleClient) []Check {
	by := map[string]IdleClient{}
	for _, c := range cs {
		by[c.Name] = c
	}
	probe, plain := by[idleProbe], by[idlePlain]
	switch name {
	case IdleC1:
		r := Ratio(probe.CPUPerTokenUS / plain.CPUPerTokenUS)
		return []Check{{Name: "CPU per token, latscope / plain", Target: fmt.Sprintf("<= %.2gx", idleCPURatioTarget),
			Value: r.String() + unstreamed(probe), Met: r.Valid() && probe.Tokens > 0 && float64(r) <= idleCPURatioTarget}}
	case IdleDashboard:
		d := by[idleDashboard].CPUPerSecMS - probe.CPUPerSecMS
		return []Check{{Name: "CPU the dashboard adds", Target: fmt.Sprintf("<= %g ms/s", idleDashboardTarget),
			Value: fmt.Sprintf("%.1f ms/s", d) + unstreamed(by[idleDashboard]), Met: by[idleDashboard].Tokens > 0 && d <= idleDashboardTarget}}
	default:
		return []Check{
			{Name: "latscope CPU", Target: fmt.Sprintf("<= %g ms/s", idleRateCPUTarget),
				Value: fmt.Sprintf("%.2f ms/s", probe.CPUPerSecMS) + unstreamed(probe), Met: probe.Tokens > 0 && probe.CPUPerSecMS <= idleRateCPUTarget},
			{Name: "latscope RSS (mean)", Target: fmt.Sprintf("<= %g MB", idleRateRSSTargetMB),
				Value: fmt.Sprintf("%.1f MB", probe.RSSMB), Met: probe.RSSMB > 0 && probe.RSSMB <= idleRateRSSTargetMB},
		}
	}
}

// unstreamed says why a figure is not judged: a client that streamed no
// token in the interval (a rate too low for it, a server that failed) was
// not measured doing the work the target is about.
func unstreamed(c IdleClient) string {
	if c.Tokens > 0 {
		return ""
	}
	return ", but no token was streamed in the interval: not judged"
}

// probeArgs are latscope run's flags for a client of the idle bench.
func probeArgs(url, model string, tokens int, rate float64, runFor time.Duration, tui bool) []string {
	args := []string{"run", "--url", url, "--dialect", "openai-chat", "--model", model,
		"--output-tokens", strconv.Itoa(tokens), "--prompt-tokens", "16", "-d", runFor.String()}
	if rate > 0 {
		args = append(args, "--rate", strconv.FormatFloat(rate, 'g', -1, 64), "--arrival", "constant")
	} else {
		args = append(args, "-c", "1")
	}
	if !tui {
		args = append(args, "--no-tui")
	}
	return args
}

// profileArgs asks a latscope client for its CPU profile in dir.
func profileArgs(dir, name string, tui bool) []string {
	if dir == "" {
		return nil
	}
	client := "headless"
	if tui {
		client = "dashboard"
	}
	return []string{"--cpu-profile", filepath.Join(dir, name+"-"+client+".cpu")}
}

// PlainArgs are the plain client's flags (see RunPlainClient).
func PlainArgs(url, model string, tokens int, rate float64, runFor time.Duration) []string {
	return []string{"--url", url, "--model", model, "--output-tokens", strconv.Itoa(tokens),
		"--rate", strconv.FormatFloat(rate, 'g', -1, 64), "--duration", runFor.String()}
}

// idleServer is one client's paced server, counting the tokens it wrote.
type idleServer struct {
	url  string
	sent *atomic.Int64
	srv  *http.Server
	done chan error
}

func startIdleServer(cfg IdleConfig) (*idleServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s := &idleServer{url: "http://" + ln.Addr().String(), sent: new(atomic.Int64), done: make(chan error, 1)}
	s.srv = &http.Server{Handler: FastServer{TokensPerWrite: 1, Model: cfg.Model, Sent: s.sent,
		FirstToken: cfg.FirstToken, Interval: cfg.Interval}, ReadHeaderTimeout: 10 * time.Second}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

func (s *idleServer) close() {
	s.srv.Close()
	<-s.done
}

// childProc is a client's running process.
type childProc struct {
	cmd    *exec.Cmd
	stderr *tailWriter
	tty    io.Closer // the terminal's master side, for a dashboard
	waited chan struct{}
	once   sync.Once
}

// startChild starts cmd, its output discarded; on a terminal of its own
// when tui.
func startChild(cmd *exec.Cmd, tui bool) (*childProc, error) {
	p := &childProc{cmd: cmd, waited: make(chan struct{}), stderr: &tailWriter{}}
	cmd.Stderr = p.stderr
	if tui {
		tty, err := attachTerminal(cmd, p.stderr) // its last screen, to say why it ended
		if err != nil {
			return nil, err
		}
		p.tty = tty
	}
	if err := cmd.Start(); err != nil {
		if p.tty != nil {
			p.tty.Close()
		}
		return nil, err
	}
	go func() {
		_ = cmd.Wait() // ended by stop; its exit status says nothing here
		close(p.waited)
	}()
	return p, nil
}

// stop ends the process: an interrupt, as a user would, then a kill after
// a few seconds.
func (p *childProc) stop() {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-p.waited:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.waited
		}
		if p.tty != nil {
			p.tty.Close()
		}
	})
}

func (p *childProc) usage() (procUsage, error) {
	select {
	case <-p.waited:
		return procUsage{}, fmt.Errorf("the client ended before its interval did; its last words: %q", p.stderr.String())
	default:
	}
	return readProcUsage(p.cmd.Process.Pid)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// tailWriter keeps the last 2 KiB written to it.
type tailWriter struct {
	mu  sync.Mutex
	buf []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - 2048; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}
