package probe

import (
	"context"
	"math"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
)

// sleepDoer is a test double of the Doer interface: each request takes
// delay (cut short by cancellation) and yields a record with a few chunks.
type sleepDoer struct {
	delay    time.Duration
	inFlight atomic.Int64
	peak     atomic.Int64
	// chunks, when set, fills the record's chunks from its start time.
	chunks func(start time.Time) []event.Chunk
	// onStart, when set, is called with the number in flight as each
	// request starts: tests act on that event instead of polling.
	onStart func(inFlight int64)
}

func (d *sleepDoer) Do(ctx context.Context, spec RequestSpec) *event.Request {
	start := time.Now()
	intended := spec.Intended
	if intended.IsZero() {
		intended = start
	}
	rec := &event.Request{
		ID: spec.ID, TraceID: spec.TraceID, Seq: spec.Seq, Worker: spec.Worker, Warmup: spec.Warmup,
		Dialect: "test", PromptTokens: spec.PromptTokens, TargetOutputTokens: spec.OutputTokens,
		Intended: intended, Start: start, SchedLag: start.Sub(intended),
	}
	n := d.inFlight.Add(1)
	defer d.inFlight.Add(-1)
	for p := d.peak.Load(); n > p && !d.peak.CompareAndSwap(p, n); p = d.peak.Load() {
	}
	if d.onStart != nil {
		d.onStart(n)
	}
	timer := time.NewTimer(d.delay)
	defer timer.Stop()
	select {
	case <-timer.C:
		rec.Outcome = event.OutcomeOK
		rec.OutputTokens = spec.OutputTokens
		if d.chunks != nil {
			rec.Chunks = d.chunks(start)
		}
	case <-ctx.Done():
		rec.Outcome = event.OutcomeCancelled
		rec.Error = "cancelled"
	}
	rec.E2E = time.Since(intended)
	return rec
}

// runCollector gathers what Run emits and checks that emit is never called
// concurrently.
type runCollector struct {
	t       *testing.T
	busy    atomic.Bool
	mu      sync.Mutex // only to read the results from the test goroutine
	reqs    []*event.Request
	markers []*event.Marker
	probe   *event.ProbeSample // the last probe sample
	samples []*event.ProbeSample
	first   event.Kind // the kind of the first event emitted
}

// sendLags returns the open loop's sends every probe sample carried.
func (c *runCollector) sendLags() []event.SendLag {
	var out []event.SendLag
	for _, p := range c.samples {
		out = append(out, p.SendLags...)
	}
	return out
}

func (c *runCollector) emit(e event.Event) {
	if !c.busy.CompareAndSwap(false, true) {
		c.t.Errorf("emit called concurrently")
	}
	defer c.busy.Store(false)
	if err := e.Validate(); err != nil {
		c.t.Errorf("emitted invalid event: %v", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.first == "" {
		c.first = e.Kind
	}
	if e.Request != nil {
		c.reqs = append(c.reqs, e.Request)
	}
	if e.Marker != nil {
		c.markers = append(c.markers, e.Marker)
	}
	if e.Probe != nil {
		c.probe = e.Probe
		c.samples = append(c.samples, e.Probe)
		if e.Probe.Raw != event.ProbeRawV1 {
			c.t.Errorf("probe sample without its raw evidence's version: %+v", e.Probe)
		}
	}
}

func (c *runCollector) markersOf(kind event.MarkerKind) []*event.Marker {
	var out []*event.Marker
	for _, m := range c.markers {
		if m.Kind == kind {
			out = append(out, m)
		}
	}
	return out
}

func loadTestPrompts(t *testing.T) *PromptSource {
	t.Helper()
	ps, err := NewPromptSource(t.Context(), PromptConfig{PromptTokens: Length{Mean: 64}, OutputTokens: Length{Mean: 8}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// onVirtualClock runs f in a synctest bubble: the Runner's timers and the
// sleepDoer's delays run on a virtual clock, so the schedule, the rates and
// the durations are exact however busy the host is. waitUntil does not spin
// meanwhile (time stands still while a goroutine spins in a bubble). Only
// for tests that are not parallel: sleepOnly is the package's. The bubble
// is the leak check too: synctest.Test fails when a goroutine started in it
// is left blocked.
func onVirtualClock(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	sleepOnly.Store(true)
	defer sleepOnly.Store(false)
	synctest.Test(t, f)
}

// runLoadBounded runs r with a generous safety deadline so a hung run fails
// the test instead of the whole package.
func runLoadBounded(t *testing.T, ctx context.Context, r *Runner, c *runCollector) RunStats {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := r.Run(ctx, c.emit); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if ctx.Err() == context.DeadlineExceeded {
		t.Fatalf("run hit the test's safety deadline")
	}
	return r.Stats()
}

// checkLoadAccounting checks sent = ok + errors and that every request has
// exactly one record.
func checkLoadAccounting(t *testing.T, st RunStats, c *runCollector) {
	t.Helper()
	if st.Sent != st.OK+st.Errors+st.RunEnded || st.WarmupSent < st.WarmupErrors {
		t.Fatalf("stats %+v: sent != ok + errors + cancelled at the run's end", st)
	}
	sum := 0
	for _, n := range st.ByOutcome {
		sum += n
	}
	if sum != st.Sent {
		t.Fatalf("by outcome %v sums to %d, sent %d", st.ByOutcome, sum, st.Sent)
	}
	if len(c.reqs) != st.Sent+st.WarmupSent {
		t.Fatalf("%d records for %d sent + %d warmup", len(c.reqs), st.Sent, st.WarmupSent)
	}
	seen := map[uint64]bool{}
	for _, r := range c.reqs {
		if seen[r.Seq] {
			t.Fatalf("seq %d recorded twice", r.Seq)
		}
		seen[r.Seq] = true
	}
	for seq := range uint64(len(c.reqs)) {
		if !seen[seq] {
			t.Fatalf("seq %d missing: seqs are not 0..%d", seq, len(c.reqs)-1)
		}
	}
}

// checkNoLoadLeak waits for the goroutine count to come back to before.
func checkNoLoadLeak(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines leaked: %d now, %d before\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestClosedLoopCapAndWarmup(t *testing.T) {
	onVirtualClock(t, func(t *testing.T) {
		d := &sleepDoer{delay: 5 * time.Millisecond}
		r, err := NewRunner(d, LoadConfig{Concurrency: 4, Requests: 40, Warmup: 4, Seed: 1}, loadTestPrompts(t))
		if err != nil {
			t.Fatal(err)
		}
		c := &runCollector{t: t}
		st := runLoadBounded(t, t.Context(), r, c)
		checkLoadAccounting(t, st, c)
		if st.Sent != 40 || st.OK != 40 || st.WarmupSent != 4 {
			t.Fatalf("stats %+v, want 40 sent and ok, 4 warmup", st)
		}
		if p := d.peak.Load(); p > 4 || st.InFlightPeak > 4 {
			t.Fatalf("peak in flight %d (runner says %d), want at most 4", p, st.InFlightPeak)
		}
		idRE := regexp.MustCompile(`^ls-` + r.RunID() + `-\d+$`)
		traces := map[string]bool{}
		for _, rec := range c.reqs {
			if rec.Warmup != (rec.Seq < 4) {
				t.Fatalf("seq %d warmup=%v", rec.Seq, rec.Warmup)
			}
			if !idRE.MatchString(rec.ID) || !strings.HasSuffix(rec.ID, "-"+strconv.FormatUint(rec.Seq, 10)) {
				t.Fatalf("request id %q", rec.ID)
			}
			if len(rec.TraceID) != 32 || traces[rec.TraceID] {
				t.Fatalf("trace id %q not 32 hex digits or repeated", rec.TraceID)
			}
			traces[rec.TraceID] = true
			if !rec.Intended.Equal(rec.Start) || rec.SchedLag != 0 {
				t.Fatalf("closed loop record intended %s start %s lag %s", rec.Intended, rec.Start, rec.SchedLag)
			}
		}
		if r.InFlight() != 0 {
			t.Fatalf("%d in flight after Run", r.InFlight())
		}
		if err := r.Run(t.Context(), c.emit); err == nil {
			t.Fatalf("second Run accepted")
		}
	})
}

func TestClosedLoopDurationStop(t *testing.T) {
	onVirtualClock(t, func(t *testing.T) {
		d := &sleepDoer{delay: 20 * time.Millisecond}
		r, err := NewRunner(d, LoadConfig{Concurrency: 3, Duration: 300 * time.Millisecond}, loadTestPrompts(t))
		if err != nil {
			t.Fatal(err)
		}
		c := &runCollector{t: t}
		st := runLoadBounded(t, t.Context(), r, c)
		checkLoadAccounting(t, st, c)
		if st.Sent == 0 || st.Interrupted {
			t.Fatalf("stats %+v: want some requests and not interrupted", st)
		}
		// Requests still running at the end were cancelled and recorded, as
		// cut by the run's end, not as errors.
		if st.OK+st.ByOutcome[event.OutcomeCancelled] != st.Sent || st.RunEnded != st.ByOutcome[event.OutcomeCancelled] || st.Errors != 0 {
			t.Fatalf("stats %+v: want only ok and cancelled at the run's end", st)
		}
		for _, rec := range c.reqs {
			if rec.Outcome == event.OutcomeCancelled && !rec.RunEnded {
				t.Fatalf("seq %d cancelled by the run's end but not marked so: %+v", rec.Seq, rec)
			}
		}
	})
}

func TestDurationWithDrainLetsRequestsFinish(t *testing.T) {
	onVirtualClock(t, func(t *testing.T) {
		d := &sleepDoer{delay: 400 * time.Millisecond}
		r, err := NewRunner(d, LoadConfig{Concurrency: 2, Duration: 100 * time.Millisecond, Drain: 10 * time.Second}, loadTestPrompts(t))
		if err != nil {
			t.Fatal(err)
		}
		c := &runCollector{t: t}
		st := runLoadBounded(t, t.Context(), r, c)
		checkLoadAccounting(t, st, c)
		// The requests in flight at Duration were allowed to finish.
		if st.Sent < 2 || st.OK != st.Sent {
			t.Fatalf("stats %+v: want the requests in flight at the end to finish ok", st)
		}
	})
}

func TestOpenLoopFollowsSchedule(t *testing.T) {
	onVirtualClock(t, func(t *testing.T) {
		d := &sleepDoer{delay: time.Millisecond}
		const rate = 100
		r, err := NewRunner(d, LoadConfig{Rate: rate, Arrival: ArrivalConstant, Requests: 50}, loadTestPrompts(t))
		if err != nil {
			t.Fatal(err)
		}
		c := &runCollector{t: t}
		st := runLoadBounded(t, t.Context(), r, c)
		checkLoadAccounting(t, st, c)
		if st.Sent != 50 {
			t.Fatalf("sent %d, want 50", st.Sent)
		}
		var first time.Time
		for _, rec := range c.reqs {
			if rec.Seq == 0 {
				first = rec.Intended
			}
		}
		for _, rec := range c.reqs {
			// Intended times are the schedule exactly, whatever the probe did.
			want := first.Add(time.Duration(rec.Seq) * time.Second / rate)
			if diff := rec.Intended.Sub(want); diff < -time.Microsecond || diff > time.Microsecond {
				t.Fatalf("seq %d intended %s after the first, want %s", rec.Seq, rec.Intended.Sub(first), want.Sub(first))
			}
			if rec.SchedLag < 0 || !rec.Start.Equal(rec.Intended.Add(rec.SchedLag)) {
				t.Fatalf("seq %d: sched lag %s does not match start - intended", rec.Seq, rec.SchedLag)
			}
		}
		// On the virtual clock nothing is late: every request goes at its
		// time, and the rate is the schedule's.
		for _, rec := range c.reqs {
			if rec.SchedLag != 0 {
				t.Fatalf("seq %d sent %v late on a virtual clock", rec.Seq, rec.SchedLag)
			}
		}
		if math.Abs(st.SendRate-rate) > 1e-6 {
			t.Fatalf("send rate %v/s, want %d/s", st.SendRate, rate)
		}
		var maxLag time.Duration
		for _, rec := range c.reqs {
			maxLag = max(maxLag, rec.SchedLag)
		}
		if st.SchedLagMax != maxLag {
			t.Fatalf("sched lag max %s, the records' max is %s", st.SchedLagMax, maxLag)
		}
		// Every send's lateness reaches a probe sample, raw, for the
		// aggregator's quantiles; the first sample comes before any request.
		lags := c.sendLags()
		if s := r.SelfStats(); len(lags) != 50 || s.MaxInFlight != DefaultMaxInFlight || c.first != event.KindProbe {
			t.Fatalf("self stats %+v, %d lag samples (want 50), first event %s (want a probe sample)", s, len(lags), c.first)
		}
		for _, l := range lags {
			if l.Lag != 0 {
				t.Fatalf("send lag %v on a virtual clock", l.Lag)
			}
		}
	})
}

func TestOpenLoopSlowResponsesKeepRate(t *testing.T) {
	onVirtualClock(t, func(t *testing.T) {
		// Each response takes 600 ms, far longer than the 20 ms between sends:
		// a closed loop would send at 1.7/s per worker, the open loop must
		// keep 50/s by starting workers.
		d := &sleepDoer{delay: 600 * time.Millisecond}
		const rate = 50
		r, err := NewRunner(d, LoadConfig{Rate: rate, Arrival: ArrivalPoisson, Requests: 60, Seed: 3}, loadTestPrompts(t))
		if err != nil {
			t.Fatal(err)
		}
		c := &runCollector{t: t}
		st := runLoadBounded(t, t.Context(), r, c)
		checkLoadAccounting(t, st, c)
		// A closed loop of one worker would manage 1.7/s. On the virtual
		// clock every request goes at its time in the Poisson schedule, so
		// the rate is the schedule's own (54.2/s for this seed).
		first, last := c.reqs[0].Intended, c.reqs[0].Intended
		for _, rec := range c.reqs {
			if rec.SchedLag != 0 {
				t.Fatalf("seq %d sent %v late: slow responses held the sender back", rec.Seq, rec.SchedLag)
			}
			first, last = minTime(first, rec.Intended), maxTime(last, rec.Intended)
		}
		if want := float64(len(c.reqs)-1) / last.Sub(first).Seconds(); math.Abs(st.SendRate-want) > 1e-6 || st.SendRate < rate*0.8 {
			t.Fatalf("send rate %v/s, want the schedule's %v/s (about %d/s)", st.SendRate, want, rate)
		}
		if st.InFlightPeak < 10 {
			t.Fatalf("in-flight peak %d: slow responses held the sender back", st.InFlightPeak)
		}
		if len(c.markersOf(event.MarkerProbeLimit)) > 0 {
			for _, m := range c.markersOf(event.MarkerProbeLimit) {
				if strings.Contains(m.Message, "cannot keep up") {
					t.Fatalf("unexpected max-in-flight marker: %s", m.Message)
				}
			}
		}
	})
}

func TestOpenLoopCannotKeepUp(t *testing.T) {
	onVirtualClock(t, func(t *testing.T) {
		d := &sleepDoer{delay: 50 * time.Millisecond}
		r, err := NewRunner(d, LoadConfig{Rate: 200, Arrival: ArrivalConstant, Requests: 20, MaxInFlight: 2}, loadTestPrompts(t))
		if err != nil {
			t.Fatal(err)
		}
		c := &runCollector{t: t}
		st := runLoadBounded(t, t.Context(), r, c)
		checkLoadAccounting(t, st, c)
		if st.Sent != 20 || d.peak.Load() > 2 {
			t.Fatalf("sent %d with peak %d, want 20 with at most 2 in flight", st.Sent, d.peak.Load())
		}
		var limit []*event.Marker
		for _, m := range c.markersOf(event.MarkerProbeLimit) {
			if strings.Contains(m.Message, "cannot keep up") {
				limit = append(limit, m)
			}
		}
		if len(limit) != 1 || limit[0].Values["in_flight"] != 2 {
			t.Fatalf("got %d max-in-flight markers %+v, want exactly one (cooldown) with in_flight 2", len(limit), limit)
		}
		// Requests went out late, and the lateness is on the record.
		if st.SchedLagMax < 100*time.Millisecond {
			t.Fatalf("max sched lag %s: late sends not recorded", st.SchedLagMax)
		}
	})
}

func TestCancelMidRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  LoadConfig
	}{
		{"closed", LoadConfig{Concurrency: 5}},
		{"open", LoadConfig{Rate: 1000, Arrival: ArrivalConstant, Requests: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			d := &sleepDoer{delay: time.Minute, onStart: func(inFlight int64) {
				if inFlight == 5 {
					cancel() // Ctrl-C once all five are in flight
				}
			}}
			r, err := NewRunner(d, tc.cfg, loadTestPrompts(t))
			if err != nil {
				t.Fatal(err)
			}
			c := &runCollector{t: t}
			st := runLoadBounded(t, ctx, r, c)
			checkLoadAccounting(t, st, c)
			if !st.Interrupted || st.Sent != 5 || st.ByOutcome[event.OutcomeCancelled] != 5 || st.RunEnded != 5 || st.Errors != 0 {
				t.Fatalf("stats %+v: want 5 sent, all cancelled by the interruption (not errors), interrupted", st)
			}
			for _, rec := range c.reqs {
				if rec.Outcome != event.OutcomeCancelled || !rec.RunEnded {
					t.Fatalf("seq %d outcome %s (run ended %t), want cancelled by Ctrl-C, marked run ended", rec.Seq, rec.Outcome, rec.RunEnded)
				}
			}
			checkNoLoadLeak(t, before)
		})
	}
}

// wrongOutcomeDoer reports a cancelled request as a stream reset, as a
// client might when the cancellation surfaces as a closed connection.
type wrongOutcomeDoer struct{ sleepDoer }

func (d *wrongOutcomeDoer) Do(ctx context.Context, spec RequestSpec) *event.Request {
	rec := d.sleepDoer.Do(ctx, spec)
	if rec.Outcome == event.OutcomeCancelled {
		rec.Outcome = event.OutcomeStreamReset
	}
	return rec
}

func TestCancelledOutcomeWhateverTheDoerSays(t *testing.T) {
	d := &wrongOutcomeDoer{sleepDoer{delay: time.Minute}}
	r, err := NewRunner(d, LoadConfig{Concurrency: 2, Duration: 100 * time.Millisecond}, loadTestPrompts(t))
	if err != nil {
		t.Fatal(err)
	}
	c := &runCollector{t: t}
	st := runLoadBounded(t, t.Context(), r, c)
	checkLoadAccounting(t, st, c)
	if st.ByOutcome[event.OutcomeCancelled] != 2 || st.Sent != 2 || st.RunEnded != 2 {
		t.Fatalf("stats %+v, want 2 cancelled at the run's end", st)
	}
}

func TestNewRunnerErrors(t *testing.T) {
	ps := loadTestPrompts(t)
	d := &sleepDoer{}
	for _, tc := range []struct {
		name string
		d    Doer
		cfg  LoadConfig
		ps   *PromptSource
	}{
		{"no doer", nil, LoadConfig{}, ps},
		{"no prompts", d, LoadConfig{}, nil},
		{"negative concurrency", d, LoadConfig{Concurrency: -1}, ps},
		{"negative rate", d, LoadConfig{Rate: -1}, ps},
		{"NaN rate", d, LoadConfig{Rate: math.NaN()}, ps},
		{"negative requests", d, LoadConfig{Requests: -1}, ps},
		{"bad arrival", d, LoadConfig{Rate: 1, Arrival: "weibull"}, ps},
		{"bad burstiness", d, LoadConfig{Rate: 1, Arrival: "gamma", Burstiness: -2}, ps},
	} {
		if _, err := NewRunner(tc.d, tc.cfg, tc.ps); err == nil {
			t.Errorf("%s: NewRunner accepted it", tc.name)
		}
	}
	r, _ := NewRunner(d, LoadConfig{}, ps)
	if err := r.Run(t.Context(), nil); err == nil {
		t.Errorf("Run accepted a nil emit")
	}
}

func TestSteppedClosedLoopFollowsItsSteps(t *testing.T) {
	d := &gateDoer{release: make(chan struct{})}
	r, err := NewRunner(d, LoadConfig{Steps: []LoadStep{{Concurrency: 2, Duration: time.Hour}, {Concurrency: 5, Duration: time.Hour}}}, loadTestPrompts(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	c := &runCollector{t: t}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, c.emit) }()
	// Two streams are admitted; the other workers wait for a higher step.
	d.waitInFlight(t, 2)
	if got := r.level.get(); got != 2 {
		t.Fatalf("level %d, want 2", got)
	}
	r.level.set(5)
	d.waitInFlight(t, 5)
	r.level.set(1)
	close(d.release) // let everything finish: now one stream sends at a time
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if p := d.peak.Load(); p != 5 {
		t.Errorf("peak in flight %d, want 5 (the highest level set)", p)
	}
	var steps int
	for _, m := range c.markers {
		if strings.HasPrefix(m.Message, "load step: 2 concurrent streams") {
			steps++
		}
	}
	if steps != 1 {
		t.Errorf("markers %v: want one saying the step began", c.markers)
	}
}

func TestSteppedLoadIsValidated(t *testing.T) {
	for _, cfg := range []LoadConfig{
		{Steps: []LoadStep{{Concurrency: 0, Duration: time.Second}}},
		{Steps: []LoadStep{{Concurrency: 4}}},
		{Steps: []LoadStep{{Concurrency: 4, Duration: time.Second}}, Rate: 3},
	} {
		if _, err := NewRunner(&sleepDoer{}, cfg, loadTestPrompts(t)); err == nil {
			t.Errorf("NewRunner(%+v) accepted it", cfg)
		}
	}
}

// gateDoer holds every request until release is closed, and counts the
// requests in flight.
type gateDoer struct {
	release  chan struct{}
	inFlight atomic.Int64
	peak     atomic.Int64
	mu       sync.Mutex
	changed  chan struct{}
}

func (d *gateDoer) Do(ctx context.Context, spec RequestSpec) *event.Request {
	n := d.inFlight.Add(1)
	for p := d.peak.Load(); n > p && !d.peak.CompareAndSwap(p, n); p = d.peak.Load() {
	}
	d.notify()
	defer func() { d.inFlight.Add(-1); d.notify() }()
	select {
	case <-d.release:
	case <-ctx.Done():
	}
	now := time.Now()
	return &event.Request{Start: now, Intended: now, Outcome: event.OutcomeOK}
}

func (d *gateDoer) notify() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.changed != nil {
		close(d.changed)
		d.changed = nil
	}
}

// waitInFlight waits until exactly n requests are in flight.
func (d *gateDoer) waitInFlight(t *testing.T, n int64) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		d.mu.Lock()
		if d.changed == nil {
			d.changed = make(chan struct{})
		}
		ch := d.changed
		d.mu.Unlock()
		if d.inFlight.Load() == n {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%d in flight, want %d", d.inFlight.Load(), n)
		}
	}
}

// TestRunEndedByItsUser: a run whose context is cancelled with pipeline.ErrRunEnded
// as the cause (a dashboard quit) ends as its own end would: the requests
// in flight are cancelled at the end of the run, not errors.
func TestRunEndedByItsUser(t *testing.T) {
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	d := &sleepDoer{delay: time.Minute, onStart: func(inFlight int64) {
		if inFlight == 3 {
			cancel(pipeline.ErrRunEnded)
		}
	}}
	r, err := NewRunner(d, LoadConfig{Concurrency: 3}, loadTestPrompts(t))
	if err != nil {
		t.Fatal(err)
	}
	c := &runCollector{t: t}
	st := runLoadBounded(t, ctx, r, c)
	checkLoadAccounting(t, st, c)
	if st.Sent != 3 || st.RunEnded != 3 || st.Errors != 0 {
		t.Fatalf("stats %+v: want 3 sent, all cancelled at the run's end", st)
	}
}
