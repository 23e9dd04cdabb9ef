package tui

import (
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
)

// benchModel is a 200×50 colour dashboard after six simulated minutes: every
// window and history full.
func benchModel(b *testing.B) *model {
	s := newSynth(synthOpts{})
	feed := &stepFeed{}
	m := newModel(feed, Options{Objectives: testSLO, Window: aggregate.Win5m, Stat: aggregate.BandP99}, colorRenderer())
	m.Update(sizeMsg(200, 50))
	for range 360 {
		s.advance(1)
		feed.set(s.frame())
		m.Update(tickMsg{})
	}
	return m
}

// BenchmarkView renders a whole 200×50 frame (the charts as drawn at their
// last second) against a baseline of the plain stage table alone.
func BenchmarkView(b *testing.B) {
	m := benchModel(b)
	s := &m.frame.Snapshot
	rows := tableRows(s, m.window)
	plain := newStyles(plainRenderer(), true)
	// testing.Benchmark cannot run inside a benchmark: time the baseline
	// by hand, in this same run.
	baseNs, baseB := measure(2000, func() { _ = renderTable(plain, rows, nil, m.window, tableWidth, 20) })
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		m.out = m.render()
	}
	b.StopTimer()
	ns, bytes := measure(200, func() { m.out = m.render() })
	b.ReportMetric(ns/1e6, "ms/frame")
	b.ReportMetric(bytes/1024, "KB/frame")
	b.ReportMetric(baseNs/1e6, "baseline-ms/op")
	b.ReportMetric(baseB/1024, "baseline-KB/op")
	b.ReportMetric(ns/baseNs, "x-baseline")
}

// measure runs fn n times and returns its mean time and bytes allocated.
func measure(n int, fn func()) (ns, bytes float64) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	for range n {
		fn()
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	return float64(elapsed.Nanoseconds()) / float64(n), float64(after.TotalAlloc-before.TotalAlloc) / float64(n)
}

// BenchmarkChartsRedraw is the once-a-second cost of redrawing the four
// ntcharts time series at 200×50.
func BenchmarkChartsRedraw(b *testing.B) {
	m := benchModel(b)
	b.ReportAllocs()
	for b.Loop() {
		m.charts.key = chartKey{} // force a redraw
		m.out = m.render()
	}
}

// BenchmarkPipeline drives the whole live path on one core with simulated
// time: a synthetic source of 2,000 requests/s of 50 tokens each (100,000
// token events/s) published into a fan-out, with a raw probe sample a
// second (event.ProbeRawV1: the aggregator judges the probe, its stall
// detector among it); a real aggregator on a lossless subscription
// publishing snapshots (the request sample among them) every simulated
// 250 ms into a pipeline.Latest; and the dashboard model reading the feed
// and rendering at 10 simulated frames a second, 200×50. It reports how many simulated seconds one CPU second
// carries (above 1: it keeps up on one core), the largest backlog the
// aggregator's subscription reached, and the heap in use after GC at 10
// simulated minutes over that at 1.
func BenchmarkPipeline(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const (
		perSec  = 2000
		tokens  = 50
		minutes = 10
	)
	for b.Loop() {
		r := runPipeline(b, perSec, tokens, minutes*60)
		b.ReportMetric(r.simPerCPU, "sim-s/cpu-s")
		b.ReportMetric(float64(r.maxBacklog), "max-backlog")
		b.ReportMetric(float64(r.heap1)/(1<<20), "heap-1min-MiB")
		b.ReportMetric(float64(r.heap10)/(1<<20), "heap-10min-MiB")
		b.ReportMetric(float64(r.heap10)/float64(r.heap1), "heap-10/1")
		b.ReportMetric(float64(r.frames), "frames")
	}
}

type pipelineResult struct {
	simPerCPU     float64
	maxBacklog    int
	heap1, heap10 uint64
	frames        int
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

func runPipeline(b *testing.B, perSec, tokens, seconds int) pipelineResult {
	fan := pipeline.NewFanout()
	aggSub := fan.Subscribe("aggregator", 4096, pipeline.Lossless)
	snaps := pipeline.NewLatest[aggregate.Snapshot]()
	feed := NewLiveFeed(snaps)
	m := newModel(feed, Options{Objectives: testSLO, Window: aggregate.Win1m}, colorRenderer())
	m.Update(sizeMsg(200, 50))

	var wg sync.WaitGroup
	var taken atomic.Int64 // events the aggregator has taken
	wg.Go(func() {
		agg := aggregate.New(aggregate.Config{})
		next := t0.Add(aggregate.DefaultEvery)
		for ev := range aggSub.Events() {
			agg.Add(ev)
			for !agg.Latest().Before(next) {
				snaps.Put(agg.Snapshot(next))
				next = next.Add(aggregate.DefaultEvery)
			}
			taken.Add(1)
		}
	})

	gen := newSynth(synthOpts{perSec: perSec, tokens: tokens})
	var published int64
	publish := func(ev event.Event) { published++; fan.Publish(ev) }
	gen.emit = publish
	gen.emit(event.NewSession(&event.Session{Time: t0, Target: "http://bench:8000", Server: "vllm", Dialect: "openai-chat", Load: event.Load{Mode: "open", Rate: float64(perSec)}}))
	var res pipelineResult
	start := cpuTime()
	for sec := range seconds {
		// One second of events, in ten slices with a frame after each.
		base := t0.Add(time.Duration(sec) * time.Second)
		for slice := range 10 {
			for i := slice * perSec / 10; i < (slice+1)*perSec/10; i++ {
				gen.seq++
				publish(event.NewRequest(benchRequest(gen, base.Add(time.Duration(i)*time.Second/time.Duration(perSec)), tokens)))
			}
			res.maxBacklog = max(res.maxBacklog, len(aggSub.Events()))
			// In real time the aggregator would have had this slice's
			// 100 ms; on one core with simulated time, let it catch up.
			waitFor(&taken, published)
			m.Update(tickMsg{})
			res.frames++
		}
		gen.sec = sec
		gen.secondSamples(base.Add(time.Second))
		switch sec + 1 {
		case 60:
			waitFor(&taken, published)
			res.heap1 = heapAfterGC()
		case seconds:
			waitFor(&taken, published)
			res.heap10 = heapAfterGC()
		}
	}
	used := cpuTime() - start
	fan.Close()
	wg.Wait()
	res.simPerCPU = float64(seconds) / used.Seconds()
	if m.renders < seconds {
		_, sv := snaps.Get()
		b.Fatalf("only %d renders in %d simulated seconds (snapshots %d, version %d)", m.renders, seconds, sv, m.version)
	}
	return res
}

// waitFor lets the aggregator catch up with the producer before a memory
// reading, so the reading is the steady state, not a backlog in flight.
func waitFor(taken *atomic.Int64, published int64) {
	for taken.Load() < published {
		runtime.Gosched()
	}
}

// secondSamples emits one second's server, probe and GPU samples.
func (s *synth) secondSamples(at time.Time) {
	p := s.load(s.sec)
	waiting, running := 12*p, 16.0
	s.emit(event.NewServer(&event.ServerSample{Time: at, Source: "http://bench:8000/metrics", Dialect: "vllm", Interval: time.Second, Waiting: &waiting, Running: &running}))
	s.emit(event.NewGPU(s.gpuSample(at, p)))
	s.emit(event.NewProbe(&event.ProbeSample{Time: at, InFlight: 200, MaxInFlight: 200, CPUPercent: 50, Cores: 2, Raw: event.ProbeRawV1,
		SendLags: []event.SendLag{{At: -time.Millisecond, Lag: 100 * time.Microsecond}}}))
}

// benchRequest is a cheap request: its stage and chunk slices are shared
// between requests (records are read-only once emitted), so the benchmark
// measures the path, not the generator.
func benchRequest(s *synth, intended time.Time, tokens int) *event.Request {
	tpl := benchTemplate(tokens, int(s.seq%8))
	r := *tpl
	r.Seq, r.Intended, r.Start = s.seq, intended, intended
	r.ID = "" // the sample and the screen do not need one here (the stall detector names it by Seq)
	return &r
}

var benchTemplates sync.Map // key: tokens*8+variant → *event.Request

func benchTemplate(tokens, variant int) *event.Request {
	key := tokens*8 + variant
	if r, ok := benchTemplates.Load(key); ok {
		return r.(*event.Request)
	}
	s := newSynth(synthOpts{tokens: tokens})
	s.seq = uint64(variant*13 + 1)
	r := s.request(t0, float64(variant)/8)
	for r.Outcome != event.OutcomeOK {
		r = s.request(t0, float64(variant)/8)
	}
	benchTemplates.Store(key, r)
	return r
}
