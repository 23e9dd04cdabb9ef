package report

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/recorder"
)

// t0 is the start of every synthetic session, off any round boundary so
// that windows and points do not line up with it by luck.
var t0 = time.Date(2026, 5, 6, 7, 8, 9, 250_000_000, time.UTC)

// synth describes a synthetic session: an open loop sending one request
// every interval to a server whose queue wait is exponential with mean
// queueMean, with server, probe and GPU samples every second and a few
// markers. The same seed gives the same events.
type synth struct {
	seed       uint64
	duration   time.Duration
	interval   time.Duration
	queueMean  time.Duration
	errorEvery int // every errorEvery-th request fails with a 503 (0: none)
	simulated  bool
	header     func(*event.Session) // edits the header, if set
	// estimatedQueue makes the queue an estimate (as the attributor makes it
	// from the waiting gauge) instead of the server's report.
	estimatedQueue bool
	// hostPSI, when over 0, adds the host collector's samples, every
	// second, with this PSI cpu some.
	hostPSI float64
	// legacyServerStages adds two stages the server named itself, keyed as
	// recordings made before had them ("st:loop_wait", "st:other").
	legacyServerStages bool
}

func defaultSynth(seed uint64) synth {
	return synth{seed: seed, duration: 60 * time.Second, interval: 100 * time.Millisecond,
		queueMean: 60 * time.Millisecond, errorEvery: 40, simulated: true}
}

func (s synth) sessionHeader() *event.Session {
	h := &event.Session{Time: t0, Latscope: "test", RunID: fmt.Sprintf("run%d", s.seed), Name: fmt.Sprintf("synthetic-%d", s.seed),
		Host: "probe-host", Target: "http://10.0.0.1:8000", MetricsURL: "http://10.0.0.1:8000/metrics",
		Server: "vllm", Dialect: "openai-chat", Model: "sim-7b", Simulated: s.simulated,
		Load: event.Load{Mode: "open", Rate: float64(time.Second / s.interval), Arrival: "constant",
			PromptTokens: "512", OutputTokens: "32", Duration: s.duration}}
	if s.header != nil {
		s.header(h)
	}
	return h
}

// recorded is an event with the time it reaches the recorder.
type recorded struct {
	at time.Time
	ev event.Event
}

// events returns the session's events (not the header) in the order a
// recorder would write them: a request when it ends plus the time its
// server span takes to join, samples when taken, markers a second late.
func (s synth) events() []event.Event {
	rng := rand.New(rand.NewPCG(s.seed, 0x5eed))
	uniform := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Float64()*float64(hi-lo)) }
	var out []recorded
	n := int(s.duration / s.interval)
	for i := range n {
		r := s.request(rng, i, t0.Add(time.Duration(i)*s.interval))
		out = append(out, recorded{eventTime(event.NewRequest(r)).Add(uniform(0, 400*time.Millisecond)), event.NewRequest(r)})
	}
	queueFactor := float64(s.queueMean) / float64(60*time.Millisecond)
	for sec := time.Duration(0); sec <= s.duration; sec += time.Second {
		at := t0.Add(sec)
		waiting := math.Round(3*queueFactor + rng.NormFloat64()*0.7)
		running, kv := 8.0, 0.3+0.05*rng.Float64()
		out = append(out,
			recorded{at, event.NewServer(&event.ServerSample{Time: at, Source: "http://10.0.0.1:8000/metrics", Dialect: "vllm",
				Interval: time.Second, Waiting: &waiting, Running: &running, KVCache: &kv,
				Stages: map[string]event.HistStat{"queue": {Count: 10, Mean: time.Duration(float64(s.queueMean) * (0.9 + 0.2*rng.Float64()))}}})},
			recorded{at, event.NewProbe(&event.ProbeSample{Time: at, InFlight: 14 + rng.IntN(4), CPUPercent: 12})},
			recorded{at, event.NewGPU(&event.GPUSample{Time: at, Available: true, Simulated: s.simulated, Devices: []event.GPUDevice{{
				Name: "Simulated H100", UtilGPU: 90, MemUsed: 20 << 30, MemTotal: 80 << 30, PowerMilliW: 400_000, TempC: 60, SMClockMHz: 1980}}})},
		)
	}
	for sec := time.Duration(0); s.hostPSI > 0 && sec <= s.duration; sec += time.Second {
		psi, steal, self, rq := s.hostPSI, 0.0, 0.07, 9
		at := t0.Add(sec)
		out = append(out, recorded{at, event.NewHost(&event.HostSample{Time: at, Interval: time.Second, Available: true, Cores: 2,
			PSISome: &psi, PSISomeAvg10: &psi, Steal: &steal, SelfCPU: &self, RunQueue: &rq})})
	}
	for _, m := range []event.Marker{
		{Time: t0.Add(20 * time.Second), Kind: event.MarkerStall, Cause: event.StallFrontEndBlock, Source: "stall-detector", Message: "front-end block: 4 streams paused together, longest gap ~100 ms", Duration: 100 * time.Millisecond},
		{Time: t0.Add(40 * time.Second), Kind: event.MarkerNote, Source: "test", Message: "halfway there"},
	} {
		out = append(out, recorded{m.Time.Add(time.Second), event.NewMarker(&m)})
	}
	slices.SortStableFunc(out, func(a, b recorded) int { return a.at.Compare(b.at) })
	evs := make([]event.Event, len(out))
	for i, r := range out {
		evs[i] = r.ev
	}
	return evs
}

func (s synth) request(rng *rand.Rand, i int, at time.Time) *event.Request {
	uniform := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Float64()*float64(hi-lo)) }
	r := &event.Request{ID: fmt.Sprintf("req-%d", i), Seq: uint64(i), Dialect: "openai-chat", Model: "sim-7b",
		PromptTokens: 512, TargetOutputTokens: 32, Intended: at, Start: at}
	if s.errorEvery > 0 && i%s.errorEvery == s.errorEvery-1 {
		r.Outcome, r.Status, r.Error, r.E2E = event.OutcomeHTTPStatus, 503, "503 Service Unavailable: upstream overloaded", 3*time.Millisecond
		return r
	}
	stage := func(st event.Stage, d time.Duration, p event.Provenance) event.StageTiming {
		return event.StageTiming{Stage: st, Duration: d, Provenance: p}
	}
	ser, cw, wr := uniform(50*time.Microsecond, 120*time.Microsecond), uniform(10*time.Microsecond, 30*time.Microsecond), uniform(30*time.Microsecond, 80*time.Microsecond)
	netOut := 40 * time.Microsecond
	tok := uniform(3*time.Millisecond, 6*time.Millisecond)
	queue := time.Duration(-math.Log(1-rng.Float64()) * float64(s.queueMean))
	prefill := uniform(75*time.Millisecond, 85*time.Millisecond)
	unattr := uniform(300*time.Microsecond, 900*time.Microsecond)
	queueProv := event.ServerReported
	if s.estimatedQueue {
		queueProv = event.Estimated
	}
	r.Breakdown = []event.StageTiming{
		stage(event.StageSerialize, ser, event.Measured), stage(event.StageConnWait, cw, event.Measured), stage(event.StageWrite, wr, event.Measured),
		stage(event.StageNetworkOut, netOut, event.Estimated), stage(event.StageTokenize, tok, event.ServerReported),
		stage(event.StageQueue, queue, queueProv), stage(event.StagePrefill, prefill, event.ServerReported),
		stage(event.StageNetworkReturn, netOut, event.Estimated), stage(event.StageUnattributed, unattr, event.Estimated),
	}
	if s.legacyServerStages {
		r.Breakdown = append(r.Breakdown, stage("st:loop_wait", uniform(2*time.Millisecond, 3*time.Millisecond), event.ServerReported),
			stage("st:other", uniform(20*time.Millisecond, 30*time.Millisecond), event.ServerReported))
	}
	for _, st := range r.Breakdown {
		r.TTFT += st.Duration
	}
	waitHeaders := netOut + tok + 500*time.Microsecond
	r.Stages = []event.StageTiming{
		stage(event.StageSerialize, ser, event.Measured), stage(event.StageConnWait, cw, event.Measured), stage(event.StageWrite, wr, event.Measured),
		stage(event.StageWaitHeaders, waitHeaders, event.Measured), stage(event.StageFirstToken, r.TTFT-ser-cw-wr-waitHeaders, event.Measured),
	}
	at2 := r.TTFT
	for k := range 32 {
		if k > 0 {
			at2 += uniform(8*time.Millisecond, 12*time.Millisecond)
		}
		r.Chunks = append(r.Chunks, event.Chunk{At: at2, Tokens: 1, Batch: 1})
	}
	r.E2E, r.OutputTokens, r.Outcome = at2+300*time.Microsecond, 32, event.OutcomeOK
	return r
}

// writeRecording records header and events to a new file in dir with the
// real recorder, ending a frame every frameEvery events (all in one frame
// when 0), and returns its path.
func writeRecording(t testing.TB, dir, name string, header *event.Session, events []event.Event, frameEvery int) string {
	t.Helper()
	path := filepath.Join(dir, name)
	w, err := recorder.Create(path, header, recorder.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range events {
		if err := w.Write(ev); err != nil {
			t.Fatal(err)
		}
		if frameEvery > 0 && (i+1)%frameEvery == 0 {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// record writes s's session to dir and returns its path.
func (s synth) record(t testing.TB, dir string) string {
	return writeRecording(t, dir, fmt.Sprintf("run-%d.zst", s.seed), s.sessionHeader(), s.events(), 200)
}

// load records s and loads it.
func (s synth) load(t testing.TB) *Recording {
	t.Helper()
	rec, err := Load(s.record(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// byTime returns evs sorted by the time the aggregator files them under.
func byTime(evs []event.Event) []event.Event {
	out := slices.Clone(evs)
	slices.SortStableFunc(out, func(a, b event.Event) int { return cmp.Compare(completionOf(a).UnixNano(), completionOf(b).UnixNano()) })
	return out
}

// completionOf is written out here rather than taken from eventTime, so
// the tests check the report's ordering against an independent statement
// of the aggregator's rule.
func completionOf(ev event.Event) time.Time {
	if r := ev.Request; r != nil && r.E2E > 0 {
		return r.Intended.Add(r.E2E)
	}
	return ev.Time()
}

func nan() float64 { return math.NaN() }
