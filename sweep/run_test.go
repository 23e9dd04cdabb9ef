package sweep

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latscope/latscope/aggregate/sweepjudge"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// vclock is the driver tests' virtual clock: the synthetic sources move it
// as they emit, and the sweep stamps its markers with it, so every time
// the sweep sees is event time and nothing waits on the wall clock.
type vclock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *vclock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *vclock) advance(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.t) {
		c.t = t
	}
}

// fifoServer is a synthetic server: one FIFO queue in front of a service
// that finishes capacity requests per second, each request then taking
// prefill to its first token and decode to its last. Below capacity
// nothing waits; above it the queue grows by the excess every second.
type fifoServer struct {
	capacity        float64
	prefill, decode time.Duration
	failFrom        float64 // loads from this one fail every request; 0: never
}

// synthRequest is one request of a step, as the server schedules it.
type synthRequest struct {
	seq            int
	sent, served   time.Time // arrival; when the service took it
	firstTok, done time.Time
}

// schedule lays out the requests of one step over horizon from t0.
func (f fifoServer) schedule(t0 time.Time, load Load, horizon time.Duration) []synthRequest {
	service := time.Duration(float64(time.Second) / f.capacity)
	var reqs []synthRequest
	free := t0
	add := func(sent time.Time) synthRequest {
		served := maxTime(sent, free)
		free = served.Add(service)
		r := synthRequest{seq: len(reqs), sent: sent, served: served, firstTok: served.Add(f.prefill)}
		r.done = r.firstTok.Add(f.decode)
		reqs = append(reqs, r)
		return r
	}
	end := t0.Add(horizon)
	if load.Mode == OpenLoop {
		gap := time.Duration(float64(time.Second) / load.Value)
		for at := t0; at.Before(end); at = at.Add(gap) {
			add(at)
		}
		return reqs
	}
	// Closed loop: each stream sends again when its last request is done.
	next := make([]time.Time, load.Concurrency())
	for i := range next {
		next[i] = t0
	}
	for {
		i := slices.IndexFunc(next, func(t time.Time) bool { return t.Equal(slices.MinFunc(next, time.Time.Compare)) })
		if !next[i].Before(end) {
			return reqs
		}
		next[i] = add(next[i]).done
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// source returns the step's source: it emits each request's record at its
// completion, and a probe sample (in flight) and a server sample (queue
// depth) every 250 ms, in time order, until the sweep cancels it; then the
// requests still in flight are recorded as cancelled, as the probe does.
func (f fifoServer) source(clock *vclock, spec StepSpec, horizon time.Duration) pipeline.Source {
	return pipeline.SourceFunc(func(ctx context.Context, emit func(event.Event)) error {
		t0 := clock.now()
		reqs := f.schedule(t0, spec.Load, horizon)
		type timed struct {
			at time.Time
			ev event.Event
		}
		var evs []timed
		fail := f.failFrom > 0 && spec.Load.Value >= f.failFrom
		for _, r := range reqs {
			if !r.done.After(t0.Add(horizon)) {
				evs = append(evs, timed{r.done, event.NewRequest(f.record(r, fail))})
			}
		}
		for at := t0; at.Before(t0.Add(horizon)); at = at.Add(250 * time.Millisecond) {
			var inFlight, waiting int
			for _, r := range reqs {
				if !r.sent.After(at) && r.done.After(at) {
					inFlight++
				}
				if !r.sent.After(at) && r.served.After(at) {
					waiting++
				}
			}
			w := float64(waiting)
			evs = append(evs,
				timed{at, event.NewProbe(&event.ProbeSample{Time: at, InFlight: inFlight})},
				timed{at, event.NewServer(&event.ServerSample{Time: at, Source: "synthetic", Waiting: &w})})
		}
		slices.SortStableFunc(evs, func(a, b timed) int { return a.at.Compare(b.at) })
		for _, e := range evs {
			if ctx.Err() != nil {
				break
			}
			clock.advance(e.at)
			emit(e.ev)
		}
		now := clock.now()
		for _, r := range reqs {
			if !r.sent.After(now) && (r.done.After(now) || r.done.After(t0.Add(horizon))) {
				emit(event.NewRequest(&event.Request{Seq: uint64(r.seq), Intended: r.sent, Start: r.sent, Outcome: event.OutcomeCancelled}))
			}
		}
		return nil
	})
}

// record is a finished request: TTFT split into queue and prefill.
func (f fifoServer) record(r synthRequest, fail bool) *event.Request {
	rec := &event.Request{Seq: uint64(r.seq), Intended: r.sent, Start: r.sent, Outcome: event.OutcomeOK}
	if fail {
		rec.Outcome, rec.Status, rec.E2E = event.OutcomeHTTPStatus, 503, time.Millisecond
		return rec
	}
	rec.TTFT, rec.E2E, rec.OutputTokens = r.firstTok.Sub(r.sent), r.done.Sub(r.sent), 10
	rec.Breakdown = []event.StageTiming{
		{Stage: event.StageQueue, Duration: r.served.Sub(r.sent), Provenance: event.ServerReported},
		{Stage: event.StagePrefill, Duration: f.prefill, Provenance: event.ServerReported},
	}
	return rec
}

// synthConfig is a sweep of f on the virtual clock, with short steps:
// 1 s warm-up, 4 s window, 20 s at most.
func synthConfig(clock *vclock, f fifoServer, plan Plan) Config {
	const stepMax = 20 * time.Second
	return Config{
		Plan: plan,
		Step: func(spec StepSpec) (pipeline.Source, error) {
			return f.source(clock, spec, stepMax+time.Second), nil
		},
		Rules: sweepjudge.Rules{Warmup: time.Second, Window: 4 * time.Second, StepMax: stepMax, Interval: 250 * time.Millisecond},
		Now:   clock.now,
		// A small buffer keeps the synthetic sources from running far
		// ahead of the sweep (they emit as fast as they can).
		Buffer: 16,
	}
}

// collect subscribes to fan and returns a function that waits for the
// stream's end and returns every event.
func collect(fan *pipeline.Fanout) func() []event.Event {
	sub := fan.Subscribe("test", 1<<16, pipeline.Lossless)
	done := make(chan []event.Event, 1)
	go func() {
		var evs []event.Event
		for ev := range sub.Events() {
			evs = append(evs, ev)
		}
		done <- evs
	}()
	return func() []event.Event { return <-done }
}

func TestRunOpenLoopFindsTheCapacity(t *testing.T) {
	clock := &vclock{t: t0}
	server := fifoServer{capacity: 90, prefill: 20 * time.Millisecond, decode: 100 * time.Millisecond}
	cfg := synthConfig(clock, server, Plan{Mode: OpenLoop, Start: 25, Factor: 2, Max: 400, Refine: 3})
	cfg.SLO = sloOf(t, "ttft.p99<100ms")
	cfg.Fanout = pipeline.NewFanout()
	events := collect(cfg.Fanout)
	var progress []Progress
	cfg.Progress = func(p Progress) { progress = append(progress, p) }

	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		load                    float64
		pass, steady, saturated bool
	}
	wants := []want{
		{25, true, true, false}, {50, true, true, false},
		{100, false, false, true}, // 10 req/s over capacity: the queue grows
		{70.71, true, true, false}, {84.09, true, true, false},
		{91.7, false, false, true}, // 1.7 req/s over: 6.8 more waiting after 4 s
	}
	if len(res.Steps) != len(wants) {
		t.Fatalf("%d steps, want %d: %+v", len(res.Steps), len(wants), res.Steps)
	}
	for i, w := range wants {
		s := res.Steps[i]
		if s.Load.Value != w.load || s.Pass != w.pass || s.Steady != w.steady || s.Saturated != w.saturated || s.Index != i+1 || s.Refine != (i >= 3) {
			t.Errorf("step %d: %s pass %v steady %v saturated %v (%s); want %v req/s pass %v steady %v saturated %v",
				i+1, s.Load, s.Pass, s.Steady, s.Saturated, s.Reason, w.load, w.pass, w.steady, w.saturated)
		}
	}
	s1 := res.Steps[0]
	if s1.Measured != 4*time.Second || math.Abs(s1.Throughput-25) > 0.5 || math.Abs(s1.Offered-25) > 0.5 ||
		s1.TTFT.P50 != 20 || s1.QueueShare != 0 || s1.LargestStage != event.StagePrefill || s1.Warmup != 25 || s1.ErrorRate != 0 {
		t.Errorf("step 1: %+v", s1)
	}
	if s := res.Steps[2]; math.Abs(s.Throughput-90) > 1 || s.LargestStage != event.StageQueue || s.Cut == 0 {
		t.Errorf("step 3 (saturated): throughput %.1f, largest %s, cut %d; want 90 ok/s, queue, some cut", s.Throughput, s.LargestStage, s.Cut)
	}
	if res.MaxLoad == nil || res.MaxLoad.Load.Value != 84.09 {
		t.Errorf("max load %+v, want 84.09 req/s", res.MaxLoad)
	}
	if res.Knee == nil || res.Knee.Load.Value != 91.7 {
		t.Errorf("knee %+v, want 91.7 req/s", res.Knee)
	}
	if res.Saturation == nil || math.Abs(res.Saturation.Throughput-90) > 1 {
		t.Errorf("saturation %+v, want about 90 ok/s", res.Saturation)
	}
	if !strings.Contains(res.Stopped, "step 3 (100 req/s) saturated") || res.Interrupted {
		t.Errorf("stopped %q, interrupted %v", res.Stopped, res.Interrupted)
	}

	// The rules, three markers per step, in order, and why the sweep
	// stopped, in the stream. (The end marker's cause varies: a synthetic
	// source may run out of events before the judge, reading behind it,
	// has decided.)
	evs := events()
	var markers []string
	for _, ev := range evs {
		if ev.Marker != nil && ev.Marker.Source == sweepjudge.MarkerSource {
			markers = append(markers, ev.Marker.Message)
		}
	}
	if len(markers) != 3*len(wants)+2 || !strings.HasPrefix(markers[0], "sweep rules: warm-up 1s, window 4s, step max 20s") ||
		markers[1] != "step 1: 25 req/s" || !strings.HasPrefix(markers[2], "step 1 ended: ") ||
		!strings.HasPrefix(markers[3], "step 1: 25 req/s offered, 25.") || markers[10] != "step 4: 70.71 req/s (refining)" ||
		markers[len(markers)-1] != "sweep ended: "+res.Stopped {
		t.Errorf("markers:\n%s", strings.Join(markers, "\n"))
	}

	// Progress: live steps while running, the steps so far after each, done last.
	last := progress[len(progress)-1]
	if !last.Done || last.Current != nil || len(last.Result.Steps) != len(wants) || last.Result.MaxLoad == nil {
		t.Errorf("last progress %+v", last)
	}
	var sawLive bool
	for _, p := range progress {
		if p.Current != nil && p.Current.Phase == PhaseMeasuring && p.Current.Snapshot.Requests.Sent > 0 {
			sawLive = true
		}
	}
	if !sawLive {
		t.Error("no progress showed a step being measured")
	}

	// The judge is a function of the stream: replaying it gives the same steps.
	replayed := replay(t, evs, cfg)
	for i := range res.Steps {
		a, b := res.Steps[i], replayed.Steps[i]
		if a.Load != b.Load || a.Pass != b.Pass || a.Throughput != b.Throughput || a.TTFT != b.TTFT || a.Reason != b.Reason {
			t.Errorf("replayed step %d differs:\nlive   %+v\nreplay %+v", i+1, a, b)
		}
	}
	if replayed.MaxLoad == nil || *replayed.MaxLoad != *res.MaxLoad {
		t.Errorf("replayed max load %+v, live %+v", replayed.MaxLoad, res.MaxLoad)
	}
}

func replay(t *testing.T, evs []event.Event, cfg Config) Result {
	t.Helper()
	ch := make(chan event.Event, len(evs))
	for _, ev := range evs {
		ch <- ev
	}
	close(ch)
	cfg.Progress = nil
	res, err := Replay(ch, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestRunClosedLoopStopsWhenThroughputIsFlat(t *testing.T) {
	clock := &vclock{t: t0}
	// 100 ms per request and 40 req/s of service: 4 streams fill it.
	server := fifoServer{capacity: 40, prefill: 20 * time.Millisecond, decode: 80 * time.Millisecond}
	res, err := Run(context.Background(), synthConfig(clock, server, Plan{Mode: ClosedLoop, Start: 1, Factor: 2, Max: 64}))
	if err != nil {
		t.Fatal(err)
	}
	var loads []float64
	for _, s := range res.Steps {
		loads = append(loads, s.Load.Value)
	}
	if !slices.Equal(loads, []float64{1, 2, 4, 8}) {
		t.Fatalf("loads %v, want 1 2 4 8 streams: 8 adds no throughput over 4", loads)
	}
	if s := res.Steps[3]; !s.Saturated || !s.Steady || s.Pass || !strings.Contains(s.Reason, "more streams only wait longer") {
		t.Errorf("8 streams: %+v", s)
	}
	if res.MaxLoad == nil || res.MaxLoad.Load.Value != 4 || res.Saturation == nil || math.Abs(res.Saturation.Throughput-40) > 1 {
		t.Errorf("max load %+v, saturation %+v; want 4 streams and about 40 ok/s", res.MaxLoad, res.Saturation)
	}
}

func TestRunStopsOnErrors(t *testing.T) {
	clock := &vclock{t: t0}
	server := fifoServer{capacity: 1000, prefill: 10 * time.Millisecond, decode: 10 * time.Millisecond, failFrom: 40}
	res, err := Run(context.Background(), synthConfig(clock, server, Plan{Mode: OpenLoop, Start: 10, Factor: 2, Max: 320}))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Steps) != 3 || !res.Steps[2].ErrorsOver || res.Steps[2].Pass || !strings.Contains(res.Steps[2].Reason, "passed the 5.0% limit") {
		t.Fatalf("steps %+v: want the sweep to stop at 40 req/s on errors", res.Steps)
	}
	// Not one request succeeded at 40 req/s: the sweep fails there and
	// says so; the max load below it is only a lower bound.
	if want := "step 3 (40 req/s): no request succeeded"; !strings.HasPrefix(res.Stopped, want) || !strings.HasPrefix(res.Failure, want) {
		t.Errorf("stopped %q, failure %q: want %q", res.Stopped, res.Failure, want)
	}
	if res.MaxLoad == nil || res.MaxLoad.Load.Value != 20 || !strings.Contains(res.MaxLoad.Why, "(40 req/s at step 3 had no successful request); a lower bound") {
		t.Errorf("max load %+v: want 20 req/s, a lower bound", res.MaxLoad)
	}
}

func TestRunInterrupted(t *testing.T) {
	clock := &vclock{t: t0}
	server := fifoServer{capacity: 1000, prefill: 10 * time.Millisecond, decode: 10 * time.Millisecond}
	cfg := synthConfig(clock, server, Plan{Mode: OpenLoop, Start: 10, Factor: 2, Max: 320})
	// Step 2's server hangs: one probe sample, then nothing until cancelled.
	cfg.Step = func(spec StepSpec) (pipeline.Source, error) {
		if spec.Index == 1 {
			return server.source(clock, spec, 10*time.Second), nil
		}
		return pipeline.SourceFunc(func(ctx context.Context, emit func(event.Event)) error {
			emit(event.NewProbe(&event.ProbeSample{Time: clock.now(), InFlight: 1}))
			<-ctx.Done()
			return nil
		}), nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Ctrl-C during step 2.
	cfg.Progress = func(p Progress) {
		if p.Current != nil && p.Current.Step.Index == 2 {
			cancel()
		}
	}
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Interrupted || len(res.Steps) != 2 || !res.Steps[1].Interrupted || res.Steps[0].Interrupted || !strings.Contains(res.Stopped, "interrupted during step 2") {
		t.Errorf("interrupted %v, stopped %q, steps %+v", res.Interrupted, res.Stopped, res.Steps)
	}
	if res.MaxLoad == nil || res.MaxLoad.Step != 1 {
		t.Errorf("max load %+v, want step 1, the only one finished", res.MaxLoad)
	}

	// Stopped before it began.
	res, err = Run(ctx, synthConfig(clock, server, Plan{Mode: OpenLoop, Start: 10, Factor: 2, Max: 320}))
	if err != nil || !res.Interrupted || len(res.Steps) != 0 || res.Stopped != "interrupted before step 1" {
		t.Errorf("cancelled sweep: %v, %+v", err, res)
	}
}

func TestRunErrors(t *testing.T) {
	boom := errors.New("boom")
	cfg := Config{Plan: Plan{Mode: OpenLoop, Start: 1, Factor: 2, Max: 4}, Step: func(StepSpec) (pipeline.Source, error) { return nil, boom }}
	if _, err := Run(context.Background(), cfg); !errors.Is(err, boom) || !strings.Contains(err.Error(), "sweep step 1 (1 req/s)") {
		t.Errorf("Run with a failing Step = %v, want it wrapped with the step", err)
	}
	cfg.Step = func(StepSpec) (pipeline.Source, error) {
		return pipeline.SourceFunc(func(context.Context, func(event.Event)) error { return boom }), nil
	}
	if _, err := Run(context.Background(), cfg); !errors.Is(err, boom) {
		t.Errorf("Run with a failing source = %v, want boom", err)
	}
	for _, bad := range []Config{
		{Step: cfg.Step},
		{Plan: cfg.Plan},
		{Plan: cfg.Plan, Step: cfg.Step, Rules: sweepjudge.Rules{Warmup: time.Minute, StepMax: time.Second}},
		{Plan: cfg.Plan, Step: cfg.Step, Rules: sweepjudge.Rules{Tolerance: 2}},
	} {
		if _, err := Run(context.Background(), bad); err == nil {
			t.Errorf("Run(%+v) took a bad config", bad)
		}
	}
}

func TestStepEndedBySourceIsJudgedOnWhatItHad(t *testing.T) {
	clock := &vclock{t: t0}
	server := fifoServer{capacity: 1000, prefill: 10 * time.Millisecond, decode: 10 * time.Millisecond}
	cfg := synthConfig(clock, server, Plan{Mode: OpenLoop, Loads: []float64{50}})
	// The source stops by itself after 5.9 s, before the first check (at
	// warm-up + window, 6 s); at its end the judge judges what it had.
	cfg.Window = 5 * time.Second
	cfg.Step = func(spec StepSpec) (pipeline.Source, error) {
		return server.source(clock, spec, 5900*time.Millisecond), nil
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := res.Steps[0]
	if !s.Steady || !s.Pass || !strings.HasPrefix(s.Reason, "its source ended by itself: TTFT p50") || s.Measured < 4800*time.Millisecond {
		t.Errorf("step %+v", s)
	}
	if got := slices.MaxFunc(res.Curve(), func(a, b CurvePoint) int { return cmp.Compare(a.Throughput, b.Throughput) }); math.Abs(got.Throughput-50) > 1 {
		t.Errorf("throughput %.1f, want 50", got.Throughput)
	}
}

// TestRunSlowStepIsJudgedOnItsLastRequests: at 1 req/s a 4 s window holds
// too few completions for a TTFT trend, so the step is judged on its last
// 15 instead of running to its maximum time.
func TestRunSlowStepIsJudgedOnItsLastRequests(t *testing.T) {
	clock := &vclock{t: t0}
	server := fifoServer{capacity: 100, prefill: 20 * time.Millisecond, decode: 100 * time.Millisecond}
	res, err := Run(context.Background(), synthConfig(clock, server, Plan{Mode: OpenLoop, Start: 1, Factor: 2, Max: 1}))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Steps) != 1 {
		t.Fatalf("%d steps, want 1: %+v", len(res.Steps), res.Steps)
	}
	s := res.Steps[0]
	// 15 completions after the 1 s warm-up: decided at about 16 s, well
	// before the 20 s maximum.
	if !s.Steady || !s.Pass || s.Measured > 17*time.Second {
		t.Errorf("step at 1 req/s: steady %v pass %v measured %s (%s); want steady within about 15 s", s.Steady, s.Pass, s.Measured, s.Reason)
	}
}

// The requests a step's end cuts are the run's own end to the probe, so
// they are counted as cancelled by the end, not as errors, live and in a
// report of the sweep's recording.
func TestStepEndIsTheRunsOwnEndToTheProbe(t *testing.T) {
	for _, cause := range []error{decision{"steady"}, errWallClock} {
		if !errors.Is(cause, pipeline.ErrRunEnded) {
			t.Errorf("%q is not pipeline.ErrRunEnded to the probe", cause)
		}
	}
}
