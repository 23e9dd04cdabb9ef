//go:build acceptance

package probe_test

// Helpers of the acceptance tests of the stall causes and of the Nagle
// flag: the real Runner and Client against the simulator, whose ground
// truth (each request's tokenization and prefill steps, each frame's
// flush) says what really happened.

import (
	"context"
	"fmt"
	"net"
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
