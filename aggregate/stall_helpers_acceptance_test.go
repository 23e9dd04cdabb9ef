//go:build acceptance

package aggregate_test

// Helpers of the acceptance tests of the stall detector, its causes and
// the Nagle flag: the real Runner and Client against the simulator, whose
// ground truth (each request's tokenization and prefill steps, each frame's
// flush) says what really happened, and the aggregator's judgement of what
// the probe emitted (ProbeJudge, as every aggregator runs it).

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

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/aggregate/internal/stall"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/sim"
	"github.com/latscope/latscope/sim/simtest"
)

// startSim serves a simulator on a loopback port for the test's lifetime.
func startSim(t *testing.T, cfg sim.Config) string {
	t.Helper()
	return simtest.Serve(t, cfg)
}

// hiccups records, until ctx ends, the stretches in which this process's
// goroutines woke more than late after their 1 ms tick: then the machine,
// not the probe or the server, decided when anything ran.
func hiccups(ctx context.Context, late time.Duration) <-chan []window {
	out := make(chan []window, 1)
	go func() {
		var ws []window
		defer func() { out <- ws }()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			now := time.Now()
			if now.Sub(last) > time.Millisecond+late {
				ws = append(ws, window{last, now})
			}
			last = now
		}
	}()
	return out
}

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

// heldThrough reports whether the process was held up for a good part (a
// quarter or more) of w: then the host, not the server, may have made the
// pause, and it cannot be judged. A late wakeup of a few milliseconds
// inside a 100 ms loop block made no part of it worth judging away.
func (b *busyWatch) heldThrough(w window) bool {
	b.done()
	around := window{w.from.Add(-20 * time.Millisecond), w.to.Add(20 * time.Millisecond)}
	var held time.Duration
	for _, x := range b.busy {
		held += x.overlap(around)
	}
	return 4*held >= w.to.Sub(w.from)
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

// runResult is what a Runner emitted, as the aggregator judged it: its
// records (a Nagle suspicion taken back where the aggregator took it back)
// and the markers, the derived ones (stalls) among them.
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
	judge := aggregate.NewProbeJudge()
	// The session's header, as latscope sends it: the simulator detected.
	judge.Add(event.NewSession(&event.Session{Time: time.Now(), Server: "latscope-sim"}))
	err = r.Run(t.Context(), func(ev event.Event) {
		ev, derived := judge.Add(ev)
		switch {
		case ev.Request != nil:
			out.recs = append(out.recs, ev.Request)
		case ev.Marker != nil:
			out.markers = append(out.markers, *ev.Marker)
		}
		out.markers = append(out.markers, derived...)
	})
	if err != nil {
		t.Fatal(err)
	}
	out.markers = append(out.markers, judge.Flush()...)
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

// simServer is the simulator's design as the aggregator knows it from the
// detected server kind: it batches prefills with decoding and tokenizes on
// its loop unless it has a tokenizer pool.
var simServer = stall.Server{Kind: "latscope-sim", BatchesPrefill: true, TokenizesOnLoop: true}

// Detector defaults the stall tests reason with (stall.Config's zero
// value): a gap counts above stallFactor × the stream's median gap and
// above stallMinGap, and stallMinStreams streams must share the pause.
const (
	stallFactor     = 5
	stallMinGap     = 20 * time.Millisecond
	stallMinStreams = 3
	decodeStreams   = 4
)

// slowTokenizerProfile is h100-7b with a tokenizer about 20 times slower
// (a pure-Python tokenizer with a long chat template): one 8K-token prompt
// then takes about 100 ms to tokenize, in one piece. A burst of faster
// prompts would block the loop as long in total, but on a busy machine
// its requests reach the loop spread out and decode frames slip between
// their tokenizations, so whether the streams pause together would depend
// on the machine; one long tokenization does not.
func slowTokenizerProfile(t *testing.T) sim.Profile {
	t.Helper()
	p, err := sim.ProfileByName("h100-7b")
	if err != nil {
		t.Fatal(err)
	}
	p.Name = "h100-7b-slow-tokenizer"
	p.TokenizePerToken = 12 * time.Microsecond
	return p
}

// stallRun is what stallScenario saw: the decode streams' records, the
// server's flush time of each of their content frames, every request's
// ground truth, and the stall markers the detector made of the records.
type stallRun struct {
	recs    []*event.Request
	flushes map[string][]time.Time
	truths  map[string]sim.Truth
	longID  string
	markers []event.Marker
	watch   *busyWatch // when the host held this process up
}

// stallScenario streams four long decodes and, once each has had 40
// frames flushed, sends one 8K-token prompt. With the tokenizer on the
// server's event loop, that prompt's tokenization holds every stream's
// frames for about 100 ms; with a tokenizer pool it holds none.
// stallPrompts is a prompt source of cfg, or the test's end.
func stallPrompts(t *testing.T, cfg probe.PromptConfig) *probe.PromptSource {
	t.Helper()
	src, err := probe.NewPromptSource(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func stallScenario(t *testing.T, tokenizerPool int) stallRun {
	t.Helper()
	run := stallRun{flushes: map[string][]time.Time{}, truths: map[string]sim.Truth{}, longID: "long", watch: watchBusy(t)}
	defer run.watch.done()
	var (
		mu sync.Mutex
		// frozen is set when the scenario returns: the server may still
		// flush to, or finish, a request whose client has gone.
		frozen       bool
		ready        = make(chan struct{})
		longFinished = make(chan struct{})
		once         sync.Once
	)
	onFrame := func(f sim.FrameInfo) { // on the server's loop, in flush order
		mu.Lock()
		defer mu.Unlock()
		if frozen {
			return
		}
		run.flushes[f.RequestID] = append(run.flushes[f.RequestID], f.At)
		started := 0
		for i := range decodeStreams {
			if len(run.flushes[decodeID(i)]) >= 40 {
				started++
			}
		}
		if started == decodeStreams {
			once.Do(func() { close(ready) })
		}
	}
	onFinish := func(tr sim.Truth) {
		mu.Lock()
		defer mu.Unlock()
		if frozen {
			return
		}
		run.truths[tr.RequestID] = tr
		if tr.RequestID == run.longID {
			close(longFinished)
		}
	}
	url := startSim(t, sim.Config{Profile: slowTokenizerProfile(t), TokenizerPool: tokenizerPool, Seed: 1, OnFrame: onFrame, OnFinish: onFinish})
	client, err := probe.NewClient(probe.ClientConfig{BaseURL: url, Dialect: probe.DialectOpenAIChat, Model: sim.DefaultModel, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	ctx := t.Context()
	long := stallPrompts(t, probe.PromptConfig{PromptTokens: probe.Length{Mean: 8192}, OutputTokens: probe.Length{Mean: 4}, Seed: 2})
	short := stallPrompts(t, probe.PromptConfig{PromptTokens: probe.Length{Mean: 32}, OutputTokens: probe.Length{Mean: 300}, Seed: 3})
	decoding := make(chan *event.Request, decodeStreams)
	for i := range decodeStreams {
		go func() {
			p, pt, ot := short.Next(uint64(i))
			decoding <- client.Do(ctx, probe.RequestSpec{ID: decodeID(i), Prompt: p, PromptTokens: pt, OutputTokens: ot})
		}()
	}
	// Land the prompt well into the decodes (an event, not a sleep), so
	// each stream's median gap is its normal decode step.
	select {
	case <-ready:
	case <-ctx.Done():
		t.Fatal("the decode streams never got going")
	}
	longCtx, cancelLong := context.WithCancel(ctx)
	longDone := make(chan *event.Request, 1)
	go func() {
		p, pt, ot := long.Next(0)
		longDone <- client.Do(longCtx, probe.RequestSpec{ID: run.longID, Prompt: p, PromptTokens: pt, OutputTokens: ot})
	}()
	det := stall.New(stall.Config{Server: simServer})
	for range decodeStreams {
		r := <-decoding
		if !r.OK() {
			t.Fatalf("decode stream failed: %s %s", r.Outcome, r.Error)
		}
		run.recs = append(run.recs, r)
		run.markers = append(run.markers, det.Add(r)...)
	}
	cancelLong() // done or not, it is a request of the probe's: evidence
	longReq := <-longDone
	run.markers = append(run.markers, det.Add(longReq)...)
	run.markers = append(run.markers, det.Flush()...)
	if longReq.OK() { // its truth comes once the server's handler ends, after the client saw the end
		select {
		case <-longFinished:
		case <-ctx.Done():
			t.Fatal("the long prompt's truth never came")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	frozen = true
	for _, r := range run.recs {
		if n := len(run.flushes[r.ID]); n != len(r.Chunks) {
			t.Fatalf("%s: the server flushed %d content frames, the probe saw %d chunks", r.ID, n, len(r.Chunks))
		}
	}
	return run
}

func decodeID(i int) string { return fmt.Sprintf("decode-%d", i) }

// at is when the probe received chunk j of r.
func at(r *event.Request, j int) time.Time { return r.Start.Add(r.Chunks[j].At) }

// medianGap is the median of r's gaps between content chunks.
func medianGap(r *event.Request) time.Duration {
	gaps := r.ITLs()
	slices.Sort(gaps)
	return gaps[len(gaps)/2]
}
