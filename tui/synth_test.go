package tui

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// t0 is the synthetic session's start: every timestamp derives from it.
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// synth is a deterministic synthetic session: a real aggregator fed with
// made-up requests, server, probe and GPU samples at fixed timestamps, so
// every frame it yields is the same on every run.
type synth struct {
	agg *aggregate.Aggregator
	// samples, when set, is the aggregator whose request sample the frames
	// show instead of agg's (a fleet's: the agents' requests).
	samples   *aggregate.Aggregator
	rng       *rand.Rand
	sec       int
	seq       uint64
	perSec    int // requests finishing per second
	tokens    int // output tokens per request
	simulated bool
	gpuSim    bool
	noGPU     bool
	reasoning int // thinking chunks per request (0: the model does not reason)
	// serverStages: each request's breakdown holds two stages the server named itself.
	serverStages bool
	// conversation: five-turn chats whose prefix cache starts evicting at
	// second evictAt; q and h sum the second's prompt and cached tokens
	// for the server's prefix-cache counters.
	conversation bool
	q, h         float64
	emit         func(event.Event)     // where events go (default: the aggregator)
	load         func(sec int) float64 // queue pressure 0..1 at a second
}

type synthOpts struct {
	perSec, tokens    int
	simulated, gpuSim bool
	noGPU             bool
	name              string
	slo               string // the session's objectives, which the aggregator judges
	reasoning         int    // a reasoning model: the first chunks of each answer are thinking
	// serverStages: the server reports stages of its own names
	// (loop_wait and other, as the simulator does).
	serverStages bool
	conversation bool // five-turn chats on a prefix cache that starts evicting
}

// evictAt is the second the synthetic conversation's prefix cache starts
// evicting.
const evictAt = 90

func newSynth(o synthOpts) *synth {
	if o.perSec == 0 {
		o.perSec = 20
	}
	if o.tokens == 0 {
		o.tokens = 64
	}
	s := &synth{
		agg: aggregate.New(aggregate.Config{}),
		rng: rand.New(rand.NewPCG(1, 2)), perSec: o.perSec, tokens: o.tokens,
		simulated: o.simulated, gpuSim: o.gpuSim, noGPU: o.noGPU, load: wave, reasoning: o.reasoning,
		serverStages: o.serverStages, conversation: o.conversation,
	}
	s.emit = s.add
	s.emit(event.NewSession(&event.Session{
		Time: t0, Latscope: "test", Name: o.name, Target: "http://gpu-7:8000", MetricsURL: "http://gpu-7:8000/metrics",
		Server: "vllm", Dialect: "openai-chat", Model: "llama-3-8b", Simulated: o.simulated,
		Load: event.Load{Mode: "closed", Concurrency: 16, SLO: o.slo},
	}))
	return s
}

func (s *synth) add(ev event.Event) { s.agg.Add(ev) }

// wave is the synthetic server's default queue pressure at second sec.
func wave(sec int) float64 { return 0.5 + 0.5*math.Sin(float64(sec)/20) }

// advance generates n more seconds of session.
func (s *synth) advance(n int) {
	for range n {
		s.second()
	}
}

func (s *synth) second() {
	base := t0.Add(time.Duration(s.sec) * time.Second)
	pressure := s.load(s.sec)
	for i := range s.perSec {
		s.emit(event.NewRequest(s.request(base.Add(time.Duration(i)*time.Second/time.Duration(s.perSec)), pressure)))
	}
	waiting, running := 12*pressure, 16.0
	kv := 0.4 + 0.3*pressure
	sample := &event.ServerSample{Time: base, Source: "http://gpu-7:8000/metrics", Dialect: "vllm", Interval: time.Second,
		Waiting: &waiting, Running: &running, KVCache: &kv}
	if s.conversation {
		q, h := s.q, s.h
		sample.PrefixQueries, sample.PrefixHits = &q, &h
		s.q, s.h = 0, 0
	}
	s.emit(event.NewServer(sample))
	s.emit(event.NewProbe(&event.ProbeSample{Time: base, InFlight: 16, MaxInFlight: 16, Concurrency: 16, CPUPercent: 21, SchedLagP99: 300 * time.Microsecond, LagSamples: 40}))
	if !s.noGPU {
		s.emit(event.NewGPU(s.gpuSample(base, pressure)))
	}
	switch s.sec % 45 {
	case 30:
		s.emit(event.NewMarker(&event.Marker{Time: base.Add(800 * time.Millisecond), Kind: event.MarkerStall, Source: "stall-detector",
			Message: "prefill interference: 14 streams paused 41 ms while req ls-1-77 (8,192 tokens) prefilled", Duration: 41 * time.Millisecond}))
	case 40:
		s.emit(event.NewMarker(&event.Marker{Time: base.Add(200 * time.Millisecond), Kind: event.MarkerGap, Source: "probe",
			Message: "40 ms inter-token gap on req ls-1-88 (Nagle/delayed-ACK signature)"}))
	}
	s.sec++
}

func (s *synth) gpuSample(at time.Time, pressure float64) *event.GPUSample {
	g := &event.GPUSample{Time: at, Available: true, Simulated: s.gpuSim}
	for i := range 2 {
		util := uint32(70 + 28*pressure - float64(i))
		g.Devices = append(g.Devices, event.GPUDevice{
			Index: i, Name: "NVIDIA H100 80GB HBM3", UtilGPU: util, MemUsed: uint64(70+i) << 30, MemTotal: 80 << 30,
			PowerMilliW: uint32(300_000 + 100_000*pressure), PowerLimitMW: 700_000, TempC: 60 + uint32(i), SMClockMHz: 1980,
		})
	}
	if pressure > 0.9 {
		g.Devices[0].ThrottleReason = []string{"sw_power_cap"}
	}
	return g
}

func (s *synth) request(intended time.Time, pressure float64) *event.Request {
	s.seq++
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	j := func(v float64) float64 { return v * (0.8 + 0.4*s.rng.Float64()) }
	r := &event.Request{
		ID: fmt.Sprintf("ls-1-%d", s.seq), Seq: s.seq, Dialect: "openai-chat", Model: "llama-3-8b",
		PromptTokens: 512, TargetOutputTokens: s.tokens, Intended: intended, Start: intended.Add(ms(0.05)), SchedLag: ms(0.05),
		Server: &event.ServerTiming{Source: "otlp"},
	}
	switch {
	case s.seq%97 == 0:
		r.Outcome, r.Status, r.Error = event.OutcomeHTTPStatus, 429, "rate limited"
		r.E2E = ms(3)
		return r
	case s.seq%389 == 0:
		r.Outcome, r.Error = event.OutcomeStreamReset, "connection reset after 37 tokens"
		r.E2E = ms(900)
		return r
	}
	queue := j(5 + 200*pressure*pressure)
	if s.rng.IntN(100) == 0 {
		queue *= 4 // the slow tail the p99 band shows
	}
	bd := []event.StageTiming{
		{Stage: event.StageSchedLag, Duration: ms(0.05), Provenance: event.Measured},
		{Stage: event.StageSerialize, Duration: ms(j(0.12)), Provenance: event.Measured},
		{Stage: event.StageWrite, Duration: ms(j(0.04)), Provenance: event.Measured},
		{Stage: event.StageNetworkOut, Duration: ms(0.5), Provenance: event.Estimated, Source: "connect_rtt"},
		{Stage: event.StageTokenize, Duration: ms(j(9)), Provenance: event.ServerReported, Source: "otlp"},
		{Stage: event.StageQueue, Duration: ms(queue), Provenance: event.ServerReported, Source: "otlp"},
		{Stage: event.StagePrefill, Duration: ms(j(s.prefillMs(r))), Provenance: event.ServerReported, Source: "otlp"},
		{Stage: event.StageFirstDecode, Duration: ms(j(6)), Provenance: event.ServerReported, Source: "otlp"},
		{Stage: event.StageNetworkReturn, Duration: ms(0.5), Provenance: event.Estimated, Source: "connect_rtt"},
		{Stage: event.StageUnattributed, Duration: ms(j(1.5)), Provenance: event.Estimated, Source: "residual"},
	}
	if s.serverStages {
		bd = append(bd,
			event.StageTiming{Stage: event.ServerTimingPrefix + "loop_wait", Duration: ms(j(60)), Provenance: event.ServerReported, Source: "server-timing"},
			event.StageTiming{Stage: event.ServerTimingPrefix + "other", Duration: ms(j(30)), Provenance: event.ServerReported, Source: "server-timing"})
	}
	var ttft time.Duration
	for _, st := range bd {
		ttft += st.Duration
	}
	client := bd[0].Duration + bd[1].Duration + bd[2].Duration
	r.Breakdown = bd
	r.Stages = []event.StageTiming{
		bd[0], bd[1], bd[2],
		{Stage: event.StageWaitHeaders, Duration: ms(1), Provenance: event.Measured},
		{Stage: event.StageFirstToken, Duration: ttft - client - ms(1), Provenance: event.Measured},
	}
	r.TTFT, r.FirstEvent = ttft, ttft
	at := ttft - r.SchedLag
	r.Chunks = make([]event.Chunk, s.tokens)
	for i := range r.Chunks {
		if i > 0 {
			gap := j(22)
			if i == s.tokens/2 && s.seq%7 == 0 {
				gap = 41 // a stall
			}
			at += ms(gap)
		}
		r.Chunks[i] = event.Chunk{At: at, Tokens: 1, Batch: 1}
	}
	r.OutputTokens = s.tokens
	if n := s.reasoning; n > 0 && n < s.tokens {
		r.ReasoningTokens = n
		r.TTFTAnswer = r.TTFT + r.Chunks[n].At - r.Chunks[0].At
	}
	r.E2E = r.SchedLag + at + ms(0.3)
	r.Outcome = event.OutcomeOK
	if s.seq%53 == 0 {
		r.Flags = []event.Flag{event.FlagNagleSuspect}
	}
	return r
}

// prefillMs is r's prefill in ms: fixed, or in a conversation its turn's
// uncached tokens' (setting its turn, prompt and cached tokens).
func (s *synth) prefillMs(r *event.Request) float64 {
	if !s.conversation {
		return 95
	}
	r.Turn = int(r.Seq%5) + 1
	r.Session = fmt.Sprintf("c-%d", r.Seq/5)
	r.PromptTokens = 200 * r.Turn
	cached := r.PromptTokens - 200
	if s.sec >= evictAt {
		cached /= 4
	}
	r.Server.CachedTokens = cached
	s.q += float64(r.PromptTokens)
	s.h += float64(cached)
	return 0.2 * float64(r.PromptTokens-cached)
}

// frame is the session now.
func (s *synth) frame() Frame {
	snap := s.agg.Snapshot(t0.Add(time.Duration(s.sec) * time.Second))
	if s.samples != nil {
		snap.Sample = s.samples.Snapshot(snap.Now).Sample
	}
	return Frame{Snapshot: snap}
}

// stepFeed is a Feed the test moves by hand.
type stepFeed struct {
	fr      Frame
	version uint64
}

func (f *stepFeed) Frame() (Frame, uint64) { return f.fr, f.version }
func (f *stepFeed) set(fr Frame)           { f.fr = fr; f.version++ }
