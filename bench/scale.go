package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// The scale targets: at 10,000 streams in a closed loop the probe's
// process stays within 700 MB, handles at least 0.8x the bare client's
// token events per second, at no more than 1.5x its CPU per event; at
// 1,000 streams it times tokens within 1.2x the bare client's |error|.
// At the other stream counts the figures are stated, not judged.
const (
	TargetScaleRSS          = 700_000_000 // bytes, peak resident set of the probe's process
	TargetScaleRSSStreams   = 10_000
	TargetScaleEvents       = 0.8 // probe/bare token events per second, at least
	TargetScaleCPU          = 1.5 // probe/bare CPU per token event, at most
	TargetScaleRatio        = 1.2
	TargetScaleRatioStreams = 1_000
	maxScaleStreams         = 100_000
	scaleDrainSlack         = 10 * time.Second
)

// DefaultScaleStreams are the stream counts the scale bench runs.
var DefaultScaleStreams = []int{1000, 5000, 10000}

// The scale bench's load models: a closed loop of N streams, each sending
// when its last request ended, and an open loop sending at the rate that
// keeps N requests in flight on the server's schedule (N over one
// request's length), on time whatever the server does.
const (
	ScaleClosed = "closed"
	ScaleOpen   = "open"
)

// DefaultScaleLoads are the load models the scale bench runs at each count.
var DefaultScaleLoads = []string{ScaleClosed, ScaleOpen}

// ScaleConfig says what the scale bench runs.
type ScaleConfig struct {
	Streams []int
	// Loads are the load models run at each count, ScaleClosed and
	// ScaleOpen (none: closed loop alone).
	Loads    []string
	Warmup   time.Duration // per phase, before the measured window
	Duration time.Duration // the measured window of each phase
	// Rounds is how many phases each client gets per stream count, in
	// alternating order; their errors are pooled (0 means 1).
	Rounds int
	// The server's fixed schedule: the first content frame FirstToken after
	// a request arrives, then one every Interval, OutputTokens in all.
	FirstToken, Interval time.Duration
	OutputTokens         int
	// StartServer starts a server on that schedule that writes its
	// FrameLogs (the flush time of every content frame) to truthPath by
	// the time stop returns.
	StartServer func(ctx context.Context, truthPath string) (baseURL string, stop func() error, err error)
	// RunClient runs one phase (see ChildScaleCase).
	RunClient func(ctx context.Context, spec ScaleSpec) (ScaleRun, error)
	// Dir holds the phases' frame logs; "" makes a temporary one.
	Dir string
	// ProfileDir, when set, gets each phase's CPU profile as
	// STREAMS-LOAD-CLIENT-ROUND.cpu (for go tool pprof).
	ProfileDir string
}

// Validate reports the first problem with c, as a message fit for the user.
func (c ScaleConfig) Validate() error {
	if err := c.validatePhases(); err != nil {
		return err
	}
	switch {
	case c.Duration < 100*time.Millisecond || c.Duration > time.Hour:
		return fmt.Errorf("duration must be between 100ms and 1h, got %s", c.Duration)
	case c.Rounds < 0 || c.Rounds > 100:
		return fmt.Errorf("rounds must be between 1 and 100, got %d", c.Rounds)
	case c.Warmup < 0 || c.Warmup > time.Hour:
		return fmt.Errorf("warmup must be between 0 and 1h, got %s", c.Warmup)
	case c.FirstToken < 0 || c.FirstToken > time.Minute:
		return fmt.Errorf("first token delay must be between 0 and 1m, got %s", c.FirstToken)
	case c.Interval < time.Millisecond || c.Interval > time.Minute:
		return fmt.Errorf("token interval must be between 1ms and 1m, got %s", c.Interval)
	case c.OutputTokens < 2 || c.OutputTokens > 100_000:
		return fmt.Errorf("output tokens must be between 2 and 100000 (ITL needs two frames), got %d", c.OutputTokens)
	case c.StartServer == nil || c.RunClient == nil:
		return errors.New("no server or client to run")
	}
	return nil
}

// validatePhases checks the stream counts and load models, which make
// the phases.
func (c ScaleConfig) validatePhases() error {
	if len(c.Streams) == 0 {
		return errors.New("streams: need at least one count")
	}
	for _, n := range c.Streams {
		if n < 1 || n > maxScaleStreams {
			return fmt.Errorf("streams must be between 1 and %d, got %d", maxScaleStreams, n)
		}
	}
	for _, l := range c.Loads {
		if l != ScaleClosed && l != ScaleOpen {
			return fmt.Errorf("load %q: want %s or %s", l, ScaleClosed, ScaleOpen)
		}
	}
	return nil
}

// requestLength is how long one request takes on the server's schedule.
func (c ScaleConfig) requestLength() time.Duration {
	return c.FirstToken + time.Duration(c.OutputTokens-1)*c.Interval
}

// loads are the load models to run, closed loop alone when none is named.
func (c ScaleConfig) loads() []string {
	if len(c.Loads) == 0 {
		return []string{ScaleClosed}
	}
	return c.Loads
}

// rate is the open loop's request rate at n streams: n requests in flight
// on average, each one request's length; 0 for a closed loop.
func (c ScaleConfig) rate(load string, n int) float64 {
	if load != ScaleOpen {
		return 0
	}
	return float64(n) / c.requestLength().Seconds()
}

// ScaleResult is the outcome of a scale run.
type ScaleResult struct {
	FirstTokenMs float64     `json:"first_token_ms"`
	IntervalMs   float64     `json:"interval_ms"`
	OutputTokens int         `json:"output_tokens"`
	Rounds       int         `json:"rounds"`
	WarmupS      float64     `json:"warmup_s"`
	DurationS    float64     `json:"duration_s"`
	Cases        []ScaleCase `json:"cases"`
	Targets      []string    `json:"targets"`
	Met          bool        `json:"met"`
}

// ScaleCase is one stream count: the probe and the bare client, measured
// one after the other against a fresh server on the same schedule.
type ScaleCase struct {
	Streams int           `json:"streams"`
	Load    string        `json:"load"`                 // ScaleClosed or ScaleOpen
	Rate    float64       `json:"rate_per_s,omitempty"` // the open loop's requests/s
	Clients []ScaleClient `json:"clients"`
	Ratio   *ScaleRatio   `json:"ratio_probe_to_bare,omitempty"`
	Checks  []Check       `json:"checks,omitempty"`
}

// ScaleClient is one client's phase: its process's cost and its timing
// error against the server's flush times, over the measured window.
type ScaleClient struct {
	Client string `json:"client"`
	// Requests counts those that ended well with a frame in the window (or
	// frames on both sides of it); Mismatched of them had another frame
	// count than the server sent; Failed counts those under way in the
	// window that did not end well.
	Requests int `json:"requests"`
	Failed   int `json:"failed"`
	// Cut counts those under way in the window that the run's end cut
	// short (the drain was over): a host that fell behind the schedule.
	Cut           int        `json:"cut_at_end"`
	Mismatched    int        `json:"frame_count_mismatch"`
	EventsPerSec  float64    `json:"events_per_sec"` // content frames that arrived in the window, per second
	CPUUsPerToken float64    `json:"cpu_us_per_token,omitempty"`
	PeakRSS       uint64     `json:"peak_rss_bytes"`
	EndRSS        uint64     `json:"end_rss_bytes"`
	FileLimit     uint64     `json:"file_limit,omitempty"`
	TTFT          ErrorStats `json:"ttft_abs_error"`
	ITL           ErrorStats `json:"itl_abs_error"`
	// Probe is the probe's worst verdict on itself over the rounds: where
	// it says it was the limit, its figures hold its own delay.
	Probe *ProbeHealth `json:"probe_health,omitempty"`
	Error string       `json:"error,omitempty"`
}

// ScaleRatio is probe/bare for p50 and p99 of each |error|.
type ScaleRatio struct {
	EventsPerSec  Ratio `json:"events_per_sec"`
	CPUUsPerToken Ratio `json:"cpu_us_per_token"`
	TTFTP50       Ratio `json:"ttft_p50"`
	TTFTP99       Ratio `json:"ttft_p99"`
	ITLP50        Ratio `json:"itl_p50"`
	ITLP99        Ratio `json:"itl_p99"`
}

// RunScale runs every stream count, the probe and then the bare client,
// each in its own process against its own server, and scores them.
func RunScale(ctx context.Context, cfg ScaleConfig) (ScaleResult, error) {
	if err := cfg.Validate(); err != nil {
		return ScaleResult{}, err
	}
	if cfg.ProfileDir != "" {
		if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
			return ScaleResult{}, fmt.Errorf("profile directory: %w", err)
		}
	}
	dir := cfg.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "latscope-scale-")
		if err != nil {
			return ScaleResult{}, fmt.Errorf("frame log directory: %w", err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	res := ScaleResult{
		FirstTokenMs: msOf(cfg.FirstToken), IntervalMs: msOf(cfg.Interval), OutputTokens: cfg.OutputTokens,
		Rounds: max(cfg.Rounds, 1), WarmupS: cfg.Warmup.Seconds(), DurationS: cfg.Duration.Seconds(),
		Targets: []string{
			fmt.Sprintf("target: at %d streams in a closed loop, the probe's peak RSS ≤ %d MB, its token events/s ≥ %.1fx the bare client's and its CPU per event ≤ %.1fx",
				TargetScaleRSSStreams, TargetScaleRSS/1_000_000, TargetScaleEvents, TargetScaleCPU),
			fmt.Sprintf("target: probe/bare p50 and p99 |error| of TTFT and ITL ≤ %.1fx at %d streams (stated at the others)", TargetScaleRatio, TargetScaleRatioStreams),
		},
		Met: true,
	}
	for _, n := range cfg.Streams {
		for _, load := range cfg.loads() {
			c, err := runScaleCase(ctx, cfg, dir, n, load)
			if err != nil {
				return res, err
			}
			for _, ch := range c.Checks {
				res.Met = res.Met && ch.Met
			}
			for _, cl := range c.Clients {
				res.Met = res.Met && cl.Error == ""
			}
			res.Cases = append(res.Cases, c)
		}
	}
	return res, ctx.Err()
}

// runScaleCase runs both clients at n streams under one load model, in
// rounds, and scores them.
func runScaleCase(ctx context.Context, cfg ScaleConfig, dir string, n int, load string) (ScaleCase, error) {
	c := ScaleCase{Streams: n, Load: load, Rate: cfg.rate(load, n)}
	tallies := []*scaleTally{newScaleTally(ScaleProbe), newScaleTally(ScaleBare)}
	order := []*scaleTally{tallies[0], tallies[1]}
	for round := range max(cfg.Rounds, 1) {
		if round > 0 {
			slices.Reverse(order) // who goes first alternates, so drift in the host's load hits both
		}
		for _, t := range order {
			if err := ctx.Err(); err != nil {
				return c, err
			}
			runScalePhase(ctx, cfg, dir, round, t, n, load)
		}
	}
	for _, t := range tallies {
		c.Clients = append(c.Clients, t.result())
	}
	c.Ratio, c.Checks = scaleChecks(n, load, c.Clients)
	return c, nil
}

// ChildScaleServer is ScaleConfig.StartServer with the server in a child
// process (see ChildServer): launch run with the schedule and
// "--truth PATH", one token per write.
func ChildScaleServer(launch Launcher, firstToken, interval time.Duration, stderr io.Writer) func(ctx context.Context, truthPath string) (string, func() error, error) {
	return func(ctx context.Context, truthPath string) (string, func() error, error) {
		l := launch.With("--first-token", firstToken.String(), "--interval", interval.String(), "--truth", truthPath)
		return ChildServer(l, stderr)(ctx, 1)
	}
}

func msOf(d time.Duration) float64 { return float64(d) / 1e6 }

// scaleTally adds up one client's phases at one stream count.
type scaleTally struct {
	row       ScaleClient
	ttft, itl []time.Duration
	events    int64
	window    time.Duration
	cpu       time.Duration
	cpuOK     bool
	errs      []error
}

func newScaleTally(client string) *scaleTally {
	return &scaleTally{row: ScaleClient{Client: client}, cpuOK: true}
}

// result is the tally as one row: the errors of every round pooled, RSS
// the most any round reached.
func (t *scaleTally) result() ScaleClient {
	r := t.row
	r.TTFT, r.ITL = SummarizeAbs(t.ttft), SummarizeAbs(t.itl)
	if t.window > 0 {
		r.EventsPerSec = float64(t.events) / t.window.Seconds()
	}
	if t.events > 0 && t.cpuOK && t.cpu > 0 {
		r.CPUUsPerToken = float64(t.cpu) / 1e3 / float64(t.events)
	}
	if err := errors.Join(t.errs...); err != nil {
		r.Error = err.Error()
	}
	return r
}

// runScalePhase runs one client at n streams against a fresh server and
// adds it, scored against the server's truth, to t.
func runScalePhase(ctx context.Context, cfg ScaleConfig, dir string, round int, t *scaleTally, n int, load string) {
	name := fmt.Sprintf("%d-%s-%s-%d", n, load, t.row.Client, round)
	truthPath := filepath.Join(dir, name+".server")
	logPath := filepath.Join(dir, name+".client")
	defer os.Remove(truthPath)
	defer os.Remove(logPath)
	url, stop, err := cfg.StartServer(ctx, truthPath)
	if err != nil {
		t.errs = append(t.errs, fmt.Errorf("start the server: %w", err))
		return
	}
	profile := ""
	if cfg.ProfileDir != "" {
		profile = filepath.Join(cfg.ProfileDir, name+".cpu")
	}
	run, runErr := cfg.RunClient(ctx, ScaleSpec{
		Client: t.row.Client, URL: url, Streams: n, Rate: cfg.rate(load, n), Warmup: cfg.Warmup, Duration: cfg.Duration,
		Drain: cfg.requestLength() + scaleDrainSlack, OutputTokens: cfg.OutputTokens, LogPath: logPath, CPUProfile: profile,
	})
	stopErr := stop()
	if run.Probe.worse(t.row.Probe) {
		t.row.Probe = run.Probe
	}
	t.row.PeakRSS, t.row.EndRSS = max(t.row.PeakRSS, run.PeakRSS), max(t.row.EndRSS, run.EndRSS)
	if run.FileLimit > 0 && (t.row.FileLimit == 0 || run.FileLimit < t.row.FileLimit) {
		t.row.FileLimit = run.FileLimit
	}
	if err := errors.Join(runErr, stopErr); err != nil {
		t.errs = append(t.errs, err)
		return
	}
	if err := t.score(run, truthPath, logPath); err != nil {
		t.errs = append(t.errs, err)
	}
}

// score compares the client's frame log with the server's, over the
// window the child reported: a request's TTFT error counts when its first
// frame arrived in the window, each ITL error when the gap's closing frame
// did, so a window shorter than a request still sees steady streams.
func (t *scaleTally) score(run ScaleRun, truthPath, logPath string) error {
	truth, err := readTruth(truthPath)
	if err != nil {
		return fmt.Errorf("server truth: %w", err)
	}
	w := scoreWindow{start: run.WindowStart, end: run.WindowEnd}
	err = readFrameLogFile(logPath, func(l FrameLog) error {
		t.scoreRequest(w, l, truth)
		return nil
	})
	if err != nil {
		return fmt.Errorf("client frames: %w", err)
	}
	t.window += time.Duration(run.WindowEnd - run.WindowStart)
	t.cpu += run.CPU
	t.cpuOK = t.cpuOK && run.CPU > 0
	return nil
}

// scoreWindow is the stretch of a phase that is scored, in Unix
// nanoseconds: [start, end).
type scoreWindow struct{ start, end int64 }

func (w scoreWindow) in(at int64) bool { return at >= w.start && at < w.end }

// readTruth reads the server's frame logs by request id.
func readTruth(path string) (map[string]FrameLog, error) {
	truth := map[string]FrameLog{}
	err := readFrameLogFile(path, func(l FrameLog) error {
		truth[l.ID] = l
		return nil
	})
	return truth, err
}

// scoreRequest tallies one client request against the server's truth.
func (t *scaleTally) scoreRequest(w scoreWindow, l FrameLog, truth map[string]FrameLog) {
	for _, f := range l.Frames {
		if w.in(f) {
			t.events++
		}
	}
	server, known := truth[l.ID]
	if !l.OK || !known {
		t.countFailure(w, l)
		return
	}
	if len(l.Frames) == 0 || l.Frames[len(l.Frames)-1] < w.start || l.Frames[0] >= w.end {
		return // wholly in the warm-up or the drain
	}
	t.row.Requests++
	if len(server.Frames) != len(l.Frames) {
		t.row.Mismatched++
	}
	first, gaps, ok := frameErrorsOf(l, server)
	if !ok {
		return
	}
	// Each error counts where it was seen: the first token's, and each
	// gap's at its closing frame, when they arrived in the window.
	if w.in(l.Frames[0]) {
		t.ttft = append(t.ttft, first)
	}
	for i, g := range gaps {
		if w.in(l.Frames[i+1]) {
			t.itl = append(t.itl, g)
		}
	}
}

// countFailure counts a failed (or unknown) request as cut or failed when
// it was under way in the window.
func (t *scaleTally) countFailure(w scoreWindow, l FrameLog) {
	last := l.Start
	if len(l.Frames) > 0 {
		last = l.Frames[len(l.Frames)-1]
	}
	switch {
	case l.Start >= w.end || last < w.start:
	case l.Cut:
		t.row.Cut++
	default:
		t.row.Failed++
	}
}

// frameErrorsOf is FrameErrors for a client's frame log against the
// server's.
func frameErrorsOf(client, server FrameLog) (ttft time.Duration, itl []time.Duration, ok bool) {
	arrivals := make([]time.Duration, len(client.Frames))
	for i, f := range client.Frames {
		arrivals[i] = time.Duration(f - client.Start)
	}
	flushed := make([]time.Time, len(server.Frames))
	for i, f := range server.Frames {
		flushed[i] = time.Unix(0, f)
	}
	return FrameErrors(time.Unix(0, client.Start), arrivals, flushed)
}

func readFrameLogFile(path string, fn func(FrameLog) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return ReadFrameLogs(f, fn)
}

// scaleChecks computes probe/bare and checks the targets that apply at n
// streams under load.
func scaleChecks(n int, load string, rows []ScaleClient) (*ScaleRatio, []Check) {
	var probe, bare *ScaleClient
	for i := range rows {
		switch rows[i].Client {
		case ScaleProbe:
			probe = &rows[i]
		case ScaleBare:
			bare = &rows[i]
		}
	}
	if probe == nil || bare == nil {
		return nil, nil
	}
	var checks []Check
	atScale := n == TargetScaleRSSStreams && load == ScaleClosed
	if atScale {
		checks = append(checks, Check{
			Name: "probe peak RSS", Target: fmt.Sprintf("≤ %d MB", TargetScaleRSS/1_000_000),
			Value: fmt.Sprintf("%.0f MB", float64(probe.PeakRSS)/1e6),
			Met:   probe.Error == "" && probe.PeakRSS > 0 && probe.PeakRSS <= TargetScaleRSS,
		})
	}
	if probe.Error != "" || bare.Error != "" {
		return nil, checks
	}
	r := &ScaleRatio{
		EventsPerSec:  Ratio(ratio(probe.EventsPerSec, bare.EventsPerSec)),
		CPUUsPerToken: Ratio(ratio(probe.CPUUsPerToken, bare.CPUUsPerToken)),
		TTFTP50:       Ratio(ratio(probe.TTFT.P50Us, bare.TTFT.P50Us)),
		TTFTP99:       Ratio(ratio(probe.TTFT.P99Us, bare.TTFT.P99Us)),
		ITLP50:        Ratio(ratio(probe.ITL.P50Us, bare.ITL.P50Us)),
		ITLP99:        Ratio(ratio(probe.ITL.P99Us, bare.ITL.P99Us)),
	}
	if atScale {
		checks = append(checks,
			Check{Name: "token events/s probe/bare", Target: fmt.Sprintf("≥ %.1fx", TargetScaleEvents),
				Value: r.EventsPerSec.String(), Met: r.EventsPerSec.Valid() && float64(r.EventsPerSec) >= TargetScaleEvents},
			Check{Name: "CPU per token event probe/bare", Target: fmt.Sprintf("≤ %.1fx", TargetScaleCPU),
				Value: r.CPUUsPerToken.String(), Met: r.CPUUsPerToken.Valid() && float64(r.CPUUsPerToken) <= TargetScaleCPU})
	}
	if n == TargetScaleRatioStreams {
		for _, x := range []struct {
			name string
			v    Ratio
		}{{"TTFT p50", r.TTFTP50}, {"TTFT p99", r.TTFTP99}, {"ITL p50", r.ITLP50}, {"ITL p99", r.ITLP99}} {
			checks = append(checks, Check{Name: x.name + " probe/bare", Target: fmt.Sprintf("≤ %.1fx", TargetScaleRatio),
				Value: x.v.String(), Met: x.v.Valid() && float64(x.v) <= TargetScaleRatio})
		}
	}
	return r, checks
}

// WriteScaleTable writes the result as a human table.
func WriteScaleTable(w io.Writer, r ScaleResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "bench scale: server in a child process streaming %d tokens per request, first after %gms, then one every %gms (%g tokens/s scheduled per stream)\n",
		r.OutputTokens, r.FirstTokenMs, r.IntervalMs, 1000/r.IntervalMs)
	b.WriteString("load: closed, N streams each sending when its last request ended; open, requests at N over one request's length per second (N in flight on average), on schedule\n")
	fmt.Fprintf(&b, "each client in its own process, one after the other, %d round(s) alternating who goes first: %gs warm-up, %gs measured each\n",
		r.Rounds, r.WarmupS, r.DurationS)
	b.WriteString("|error| of each client's arrival times against the server's flush time of each frame, in µs; RSS in MB (10^6 bytes)\n")
	b.WriteString("cut: requests the run's end cut short after the drain (the host fell behind the schedule), apart from failed\n\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "streams\tload\tclient\treqs\tfailed\tcut\tmismatch\ttok/s\tCPU µs/tok\tpeak RSS\tRSS@end\tTTFT p50\tTTFT p99\tITL p50\tITL p99\tprobe\t")
	for _, c := range r.Cases {
		for _, cl := range c.Clients {
			health := "-"
			if cl.Probe != nil {
				health = cl.Probe.State
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%d\t%.0f\t%.2f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t\n", c.Streams, c.loadText(), cl.Client,
				cl.Requests, cl.Failed, cl.Cut, cl.Mismatched, cl.EventsPerSec, cl.CPUUsPerToken, float64(cl.PeakRSS)/1e6, float64(cl.EndRSS)/1e6,
				cl.TTFT.P50Us, cl.TTFT.P99Us, cl.ITL.P50Us, cl.ITL.P99Us, health)
		}
		if c.Ratio != nil {
			fmt.Fprintf(tw, "%d\t%s\tprobe/bare\t\t\t\t\t%s\t%s\t\t\t%s\t%s\t%s\t%s\t\t\n", c.Streams, c.loadText(), c.Ratio.EventsPerSec, c.Ratio.CPUUsPerToken,
				c.Ratio.TTFTP50, c.Ratio.TTFTP99, c.Ratio.ITLP50, c.Ratio.ITLP99)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range r.Cases {
		for _, cl := range c.Clients {
			if cl.Error != "" {
				fmt.Fprintf(&b, "%d streams, %s loop, %s: MISSED: %s\n", c.Streams, c.load(), cl.Client, cl.Error)
			}
		}
	}
	writeProbeHealth(&b, r)
	if lim := fileLimit(r); lim > 0 {
		fmt.Fprintf(&b, "open-file limit in the client processes: %d (raised to the hard limit)\n", lim)
	}
	b.WriteString("\n")
	for _, t := range r.Targets {
		b.WriteString(t + "\n")
	}
	judged := false
	for _, c := range r.Cases {
		for _, ch := range c.Checks {
			judged = true
			mark := "PASS"
			if !ch.Met {
				mark = "MISSED"
			}
			fmt.Fprintf(&b, "  %d streams, %s loop: %s %s (%s) %s\n", c.Streams, c.load(), ch.Name, ch.Value, ch.Target, mark)
		}
	}
	if !judged {
		fmt.Fprintf(&b, "  neither %d nor %d streams was run: nothing judged\n", TargetScaleRatioStreams, TargetScaleRSSStreams)
	}
	if r.Met {
		b.WriteString("all targets met\n")
	} else {
		b.WriteString("some targets MISSED (see above)\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeProbeHealth says, per load model, where the probe became the limit
// by its own verdict (the one its run summary gives): the fewest streams
// at which it said so, and why.
func writeProbeHealth(b *strings.Builder, r ScaleResult) {
	for _, load := range []string{ScaleClosed, ScaleOpen} {
		var held, paused *ProbeHealth
		heldAt, pausedAt, judged := 0, 0, false
		for _, c := range r.Cases {
			for _, cl := range c.Clients {
				if c.load() != load || cl.Probe == nil {
					continue
				}
				judged = true
				switch {
				case cl.Probe.Held() && (held == nil || c.Streams < heldAt):
					held, heldAt = cl.Probe, c.Streams
				case cl.Probe.State == "paused" && (paused == nil || c.Streams < pausedAt):
					paused, pausedAt = cl.Probe, c.Streams
				}
			}
		}
		switch {
		case held != nil:
			fmt.Fprintf(b, "probe health, %s loop: the probe was the limit at %d streams (the fewest where it said so): %s\n", load, heldAt, held.Reason)
		case paused != nil:
			fmt.Fprintf(b, "probe health, %s loop: never the limit; at %d streams (the fewest) its goroutines ran late over a few shared pauses: %s\n", load, pausedAt, paused.Reason)
		case judged:
			fmt.Fprintf(b, "probe health, %s loop: the probe kept pace at every count (by its own verdict: scheduling lag, starved pauses, CPU)\n", load)
		}
	}
}

// load is the case's load model; a result written before open loops were
// measured has none, and was a closed loop.
func (c ScaleCase) load() string {
	if c.Load == "" {
		return ScaleClosed
	}
	return c.Load
}

// loadText is the load model for the table: "closed", or "open 317/s".
func (c ScaleCase) loadText() string {
	if c.load() == ScaleOpen {
		return fmt.Sprintf("open %.0f/s", c.Rate)
	}
	return c.load()
}

// fileLimit is the smallest open-file limit a client process reported.
func fileLimit(r ScaleResult) uint64 {
	var lim uint64
	for _, c := range r.Cases {
		for _, cl := range c.Clients {
			if cl.FileLimit > 0 && (lim == 0 || cl.FileLimit < lim) {
				lim = cl.FileLimit
			}
		}
	}
	return lim
}
