package probe_test

// Acceptance tests of the stall causes and of the Nagle flag: the real
// Runner and Client against the simulator, whose ground truth (each
// request's tokenization and prefill steps, each frame's flush) says what
// really happened.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/sim"
)

// groundTruth gathers what the simulator says happened.
type groundTruth struct {
	mu      sync.Mutex
	truths  map[string]sim.Truth
	flushes map[string][]time.Time
	frames  int
	onFrame func(total int) // called with the frames flushed so far
}

func newGroundTruth() *groundTruth {
	return &groundTruth{truths: map[string]sim.Truth{}, flushes: map[string][]time.Time{}}
}

// hook adds the truth's callbacks to cfg.
func (g *groundTruth) hook(cfg sim.Config) sim.Config {
	cfg.OnFinish = func(tr sim.Truth) {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.truths[tr.RequestID] = tr
	}
	cfg.OnFrame = func(f sim.FrameInfo) {
		g.mu.Lock()
		g.flushes[f.RequestID] = append(g.flushes[f.RequestID], f.At)
		g.frames++
		n, cb := g.frames, g.onFrame
		g.mu.Unlock()
		if cb != nil {
			cb(n)
		}
	}
	return cfg
}

// window is a stretch of wall-clock time.
type window struct{ from, to time.Time }

// busyWatch notes when this process's goroutines woke over 5 ms late. The
// simulator shares this process and its two cores: then the host, not the
// server's design or the probe, decided when frames went out, and a pause's
// cause cannot be judged against the simulator's ground truth.
type busyWatch struct {
	stop context.CancelFunc
	got  <-chan []window
	busy []window
}

func watchBusy(t testing.TB) *busyWatch {
	ctx, stop := context.WithCancel(t.Context())
	return &busyWatch{stop: stop, got: hiccups(ctx, 5*time.Millisecond)}
}

// done stops the watch; during can be asked after it.
func (b *busyWatch) done() {
	if b.stop != nil {
		b.stop()
		b.busy, b.stop = <-b.got, nil
	}
}

// during reports whether the process was held up around w.
func (b *busyWatch) during(w window) bool {
	b.done()
	around := window{w.from.Add(-20 * time.Millisecond), w.to.Add(20 * time.Millisecond)}
	for _, x := range b.busy {
		if x.overlap(around) > 0 {
			return true
		}
	}
	return false
}

func (w window) overlap(o window) time.Duration {
	from, to := w.from, w.to
	if o.from.After(from) {
		from = o.from
	}
	if o.to.Before(to) {
		to = o.to
	}
	return max(to.Sub(from), 0)
}

func us(t int64) time.Time { return time.UnixMicro(t) }

// tokenizations are the truth's tokenization windows of at least min.
func (g *groundTruth) tokenizations(min time.Duration) []window {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []window
	for _, tr := range g.truths {
		if time.Duration(tr.TokenizeUs)*time.Microsecond < min {
			continue
		}
		// Tokenization follows the HTTP work and the waits for the loop.
		start := tr.ArrivalUnixUs + tr.HTTPUs
		out = append(out, window{us(start), us(start + tr.LoopWaitUs + tr.TokenizeUs)})
	}
	return out
}

// prefillSteps are the truth's engine steps that computed a prompt while
// other streams decoded or waited.
func (g *groundTruth) prefillSteps() []window {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []window
	for _, tr := range g.truths {
		for _, st := range tr.PrefillSteps {
			out = append(out, window{us(st.StartUnixUs), us(st.EndUnixUs)})
		}
	}
	return out
}

// runResult is what a Runner emitted.
type runResult struct {
	recs    []*event.Request
	markers []event.Marker
	stats   probe.RunStats
}

func (r runResult) stalls() []event.Marker {
	var out []event.Marker
	for _, m := range r.markers {
		if m.Kind == event.MarkerStall {
			out = append(out, m)
		}
	}
	return out
}

func (r runResult) causes() map[event.StallCause]int {
	out := map[event.StallCause]int{}
	for _, m := range r.stalls() {
		out[m.Cause]++
	}
	return out
}

func (r runResult) flagged(f event.Flag) (n, ok int) {
	for _, rec := range r.recs {
		if rec.OK() && !rec.Warmup {
			ok++
			if rec.HasFlag(f) {
				n++
			}
		}
	}
	return n, ok
}

// runLoad runs a Runner and keeps everything it emits.
func runLoad(t testing.TB, d probe.Doer, cfg probe.LoadConfig, prompts *probe.PromptSource, setup func(*probe.Runner)) runResult {
	t.Helper()
	r, err := probe.NewRunner(d, cfg, prompts)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(r)
	}
	var out runResult
	err = r.Run(t.Context(), func(ev event.Event) {
		switch {
		case ev.Request != nil:
			out.recs = append(out.recs, ev.Request)
		case ev.Marker != nil:
			out.markers = append(out.markers, *ev.Marker)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	out.stats = r.Stats()
	return out
}

func prompts(t testing.TB, promptTokens, outputTokens int, seed int64) *probe.PromptSource {
	t.Helper()
	p, err := probe.NewPromptSource(t.Context(), probe.PromptConfig{
		PromptTokens: probe.Length{Mean: promptTokens}, OutputTokens: probe.Length{Mean: outputTokens}, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func simClient(t testing.TB, url string, hc *http.Client) *probe.Client {
	t.Helper()
	c, err := probe.NewClient(probe.ClientConfig{BaseURL: url, Dialect: probe.DialectOpenAIChat, Model: sim.DefaultModel,
		Timeout: time.Minute, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// longPromptDoer sends worker 0's requests with the long prompts and the
// other workers' with the Runner's own: decoding streams with long prompts
// landing among them, as on a shared server.
type longPromptDoer struct {
	c    *probe.Client
	long *probe.PromptSource
}

func (d longPromptDoer) Do(ctx context.Context, spec probe.RequestSpec) *event.Request {
	if spec.Worker == 0 {
		spec.Prompt, spec.PromptTokens, spec.OutputTokens = d.long.Next(spec.Seq)
	}
	return d.c.Do(ctx, spec)
}

func h100(t *testing.T) sim.Profile {
	t.Helper()
	p, err := sim.ProfileByName("h100-7b")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// visiblePause reports whether the probe's own records show a pause over
// w the detector is bound to find: enough of the decoding streams (those
// reading before and after it) have a gap across w of at least 1.5 times
// their median and 10 ms over it.
func visiblePause(recs []*event.Request, w window) bool {
	streaming, paused := 0, 0
	for _, r := range recs {
		if len(r.Chunks) < 4 {
			continue
		}
		first, last := r.Start.Add(r.Chunks[0].At), r.Start.Add(r.Chunks[len(r.Chunks)-1].At)
		if !first.Before(w.from) || !last.After(w.to) {
			continue
		}
		streaming++
		gaps := r.ITLs()
		med := slices.Clone(gaps)
		slices.Sort(med)
		m := med[len(med)/2]
		for i, g := range gaps {
			from, to := r.Start.Add(r.Chunks[i].At), r.Start.Add(r.Chunks[i+1].At)
			if !from.After(w.from) && !to.Before(w.to) && 2*g >= 3*m && g >= m+10*time.Millisecond {
				paused++
				break
			}
		}
	}
	return paused >= 3 && 2*paused >= streaming
}

// markerWindow is the time a stall marker covers.
func markerWindow(m event.Marker) window { return window{m.Time, m.Time.Add(m.Duration)} }

// With tokenization on the server's event loop, each 30K-token prompt holds
// every stream's frames for about 20 ms, twice their normal gap: found by
// the correlation, and named a front-end block.
func TestStallCausesTokenizationOnTheLoop(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("timing on the calibrated profile: not under -short or -race")
	}
	prof := h100(t)
	// A fast prefill, so the long prompts' prefill chunks do not slow the
	// decode steps: the test is about their tokenization.
	prof.PrefillPerToken = 2 * time.Microsecond
	truth := newGroundTruth()
	url := startSim(t, truth.hook(sim.Config{Profile: prof, TokenizerPool: 0, Seed: 1}))
	d := longPromptDoer{c: simClient(t, url, nil), long: prompts(t, 30000, 2, 2)}
	watch := watchBusy(t)
	res := runLoad(t, d, probe.LoadConfig{Concurrency: 5, Duration: 3 * time.Second, Drain: 20 * time.Second}, prompts(t, 32, 300, 3), nil)
	watch.done()

	toks := truth.tokenizations(15 * time.Millisecond)
	if len(toks) < 3 {
		t.Fatalf("%d long tokenizations, want several", len(toks))
	}
	stalls := res.stalls()
	visible, found := 0, 0
	for _, w := range toks {
		if !visiblePause(res.recs, w) || watch.during(w) {
			continue
		}
		visible++
		for _, m := range stalls {
			if w.overlap(markerWindow(m)) > 0 && (m.Cause == event.StallFrontEndBlock || m.Cause == event.StallProbeStarved) {
				found++
				break
			}
		}
	}
	for _, m := range stalls {
		mw := markerWindow(m)
		if watch.during(mw) {
			continue // the host held this process up: no label can be judged
		}
		for _, w := range toks {
			if ov := w.overlap(mw); 2*ov >= mw.to.Sub(mw.from) && m.Cause != event.StallFrontEndBlock && m.Cause != event.StallProbeStarved {
				t.Errorf("a pause the tokenization covers is labelled %s: %s", m.Cause, m.Message)
			}
		}
	}
	t.Logf("%d tokenizations of 30K tokens, %d visible to the probe, %d found; stall causes %v", len(toks), visible, found, res.causes())
	if n, _ := res.flagged(event.FlagNagleSuspect); n != 0 {
		t.Errorf("%d requests flagged nagle_suspect with Nagle off", n)
	}
	if visible == 0 {
		t.Skipf("the probe saw none of the %d tokenization pauses clearly, or the host held this process up during each (a starved machine)", len(toks))
	}
	if found != visible || res.causes()[event.StallFrontEndBlock] == 0 {
		t.Errorf("%d of %d visible tokenization pauses found as front-end blocks; markers:\n%s", found, visible, messages(stalls))
	}
}

// With a tokenizer pool, the demo's load (12 streams on 8 slots) pauses
// only for prefills: no pause is the front end's, and those a prefill
// step lies in are prefill interference.
func TestStallCausesDemoLoadWithTokenizerPool(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("timing on the calibrated profile: not under -short or -race")
	}
	truth := newGroundTruth()
	prof := h100(t)
	prof.MaxNumSeqs = 8
	url := startSim(t, truth.hook(sim.Config{Profile: prof, TokenizerPool: 4, Seed: 1}))
	watch := watchBusy(t)
	res := runLoad(t, simClient(t, url, nil), probe.LoadConfig{Concurrency: 12, Duration: 3 * time.Second, Drain: 20 * time.Second},
		prompts(t, 512, 128, 1), nil)
	watch.done()
	steps := truth.prefillSteps()
	causes := res.causes()
	for _, m := range res.stalls() {
		if watch.during(markerWindow(m)) {
			t.Logf("the host held this process up around: %s", m.Message)
			continue
		}
		if m.Cause == event.StallFrontEndBlock {
			t.Errorf("front-end block with the tokenizer off the loop: %s", m.Message)
		}
		mw := markerWindow(m)
		inPause := false
		for _, st := range steps {
			if st.from.Before(mw.to) && st.to.After(mw.from) {
				inPause = true
			}
		}
		if inPause && m.Cause == event.StallUnexplained {
			t.Errorf("a pause a prefill step lies in is unexplained: %s", m.Message)
		}
	}
	t.Logf("stall causes %v\n%s", causes, messages(res.stalls()))
	if n, ok := res.flagged(event.FlagNagleSuspect); n != 0 {
		t.Errorf("%d of %d requests flagged nagle_suspect with Nagle off", n, ok)
	}
	if causes[event.StallPrefillInterference] == 0 {
		t.Errorf("no prefill interference on a load whose every admission prefills among 7 decoding streams; markers:\n%s", messages(res.stalls()))
	}
}

func messages(ms []event.Marker) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "  %s %s\n", m.Time.Format("15:04:05.000"), m.Message)
	}
	return b.String()
}

// holdGate holds up whoever waits on it while it is closed.
type holdGate struct {
	mu   sync.Mutex
	open chan struct{} // closed while not holding
}

func newHoldGate() *holdGate {
	g := &holdGate{open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *holdGate) wait() {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	<-open
}

// hold holds everyone up for d.
func (g *holdGate) hold(d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	open := make(chan struct{})
	g.open = open
	time.AfterFunc(d, func() { close(open) })
}

// heldConn is a connection whose reads wait while the gate holds.
type heldConn struct {
	net.Conn
	gate *holdGate
}

func (c heldConn) Read(p []byte) (int, error) {
	c.gate.wait()
	return c.Conn.Read(p)
}

// A probe whose own goroutines are held up sees every stream pause at once;
// its scheduling-lag watch shows the pause is the probe's.
func TestStallCauseProbeStarved(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("timing on the calibrated profile: not under -short or -race")
	}
	const hold = 120 * time.Millisecond
	gate := newHoldGate()
	truth := newGroundTruth()
	var once sync.Once
	var heldAt time.Time
	truth.onFrame = func(n int) {
		if n >= 4*60 { // the streams are well under way: hold the probe
			once.Do(func() { heldAt = time.Now(); gate.hold(hold) })
		}
	}
	url := startSim(t, truth.hook(sim.Config{Profile: h100(t), Seed: 1}))
	tr := probe.NewTransport()
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return heldConn{Conn: c, gate: gate}, nil
	}
	clock := func() time.Time { gate.wait(); return time.Now() }
	res := runLoad(t, simClient(t, url, &http.Client{Transport: tr}), probe.LoadConfig{Concurrency: 4, Requests: 4},
		prompts(t, 32, 200, 1), func(r *probe.Runner) { probe.SetLagClock(r, clock) })
	if heldAt.IsZero() {
		t.Fatal("the probe was never held")
	}
	held := window{heldAt, heldAt.Add(hold)}
	starved := 0
	for _, m := range res.stalls() {
		if held.overlap(markerWindow(m)) == 0 {
			continue
		}
		if m.Cause != event.StallProbeStarved {
			t.Errorf("the probe's own pause labelled %s: %s", m.Cause, m.Message)
			continue
		}
		starved++
	}
	if starved == 0 {
		t.Errorf("no probe_starved marker over the %v the probe was held; markers:\n%s", hold, messages(res.stalls()))
	}
}
