package attribute

import (
	"container/heap"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latscope/latscope/collector"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/promdialect"
	"github.com/latscope/latscope/sim"
)

// loopRequest is one request of the closed-loop model, with the truth of
// its server stages and what the client saw of it.
type loopRequest struct {
	id                         string
	start, finish              time.Duration // client clock, from the run's start
	frontend, queue, prefill   time.Duration // the server's truth
	arrive, scheduled, firstAt time.Duration // server-side instants (arrival at the frontend)
	stages                     []event.StageTiming
	ttft                       time.Duration
	connectRTT                 time.Duration
}

// Timings of the closed-loop model (a vLLM-like server and a loopback client).
const (
	loopRTT       = 80 * us
	loopPre       = 300 * us // serialize, conn_wait and write
	loopDetok     = 200 * us // detokenize and frame the first chunk
	loopITL       = 10 * ms
	loopScrape    = time.Second
	loopRunLength = 120 * time.Second
)

// streamHeap orders streams by when they send their next request.
type streamHeap []loopStream

type loopStream struct {
	next time.Duration
	id   int
}

func (h streamHeap) Len() int { return len(h) }
func (h streamHeap) Less(i, j int) bool {
	return h[i].next < h[j].next || h[i].next == h[j].next && h[i].id < h[j].id
}
func (h streamHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *streamHeap) Push(x any)   { *h = append(*h, x.(loopStream)) }
func (h *streamHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// closedLoop simulates streams closed-loop streams against a server with
// slots batch slots and a FIFO queue: a request's frontend work, its wait
// for a slot, its prefill (with the first decode, as vLLM counts it) and its
// decode. A stream pauses between requests now and then (a user reading),
// so the server is sometimes short of work: some requests find a free slot
// and do not queue at all, others wait for one to finish, and the queue
// waits are bimodal. Requests come back in the order they finished.
func closedLoop(seed uint64, streams, slots int) []loopRequest {
	rng := rand.New(rand.NewPCG(seed, 1))
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo))) }
	free := make([]time.Duration, slots) // when each slot is free next
	h := &streamHeap{}
	for i := range streams {
		heap.Push(h, loopStream{next: time.Duration(i) * 5 * ms, id: i})
	}
	var out []loopRequest
	for n := 0; h.Len() > 0; n++ {
		s := heap.Pop(h).(loopStream)
		if s.next > loopRunLength {
			continue
		}
		r := loopRequest{id: fmt.Sprintf("loop-%04d", n), start: s.next}
		if n < streams {
			r.connectRTT = loopRTT + between(0, 20*us) // each stream's first request dials
		}
		r.frontend = between(2*ms, 8*ms)
		r.prefill = between(60*ms, 100*ms)
		decode := time.Duration(64+rng.IntN(129)) * loopITL
		r.arrive = r.start + loopPre + loopRTT/2
		slot := slices.Index(free, slices.Min(free))
		r.scheduled = max(r.arrive+r.frontend, free[slot])
		r.queue = r.scheduled - (r.arrive + r.frontend)
		r.firstAt = r.scheduled + r.prefill
		free[slot] = r.firstAt + decode

		firstToken := r.firstAt + loopDetok + loopRTT/2
		r.ttft = firstToken - r.start
		r.finish = free[slot] + loopRTT/2
		// vLLM sends its headers at once: wait_headers is a round trip and
		// a little HTTP parsing.
		waitHeaders := loopRTT + 300*us
		r.stages = []event.StageTiming{
			{Stage: event.StageSerialize, Duration: 100 * us, Provenance: event.Measured},
			{Stage: event.StageConnWait, Duration: 150 * us, Provenance: event.Measured},
			{Stage: event.StageWrite, Duration: loopPre - 250*us, Provenance: event.Measured},
			{Stage: event.StageWaitHeaders, Duration: waitHeaders, Provenance: event.Measured},
			{Stage: event.StageFirstToken, Duration: r.ttft - loopPre - waitHeaders, Provenance: event.Measured},
		}
		out = append(out, r)
		think := between(0, 4*time.Second)
		heap.Push(h, loopStream{next: r.finish + think, id: s.id})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].finish < out[j].finish })
	return out
}

// loopIntervals builds what a scrape every loopScrape would derive from the
// model's vLLM-style histograms: queue, prefill and e2e observed when a
// request finishes, TTFT when its first token leaves; the stage statistics
// come from bucket deltas with vLLM's buckets, as collector.Derive computes them.
func loopIntervals(reqs []loopRequest) []*event.ServerSample {
	requestBuckets := []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}
	ttftBuckets := []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}
	n := int(loopRunLength/loopScrape) + 30
	type obs struct{ queue, prefill, ttft []float64 }
	per := make([]obs, n)
	for _, r := range reqs {
		end := r.finish - loopRTT/2 // the server's clock
		if i := int(end / loopScrape); i < n {
			per[i].queue = append(per[i].queue, r.queue.Seconds())
			per[i].prefill = append(per[i].prefill, r.prefill.Seconds())
		}
		if i := int(r.firstAt / loopScrape); i < n {
			per[i].ttft = append(per[i].ttft, (r.firstAt - r.arrive).Seconds())
		}
	}
	stat := func(values, bounds []float64) event.HistStat {
		h := &collector.PromHist{Count: float64(len(values))}
		for _, ub := range bounds {
			c := 0.0
			for _, v := range values {
				if v <= ub {
					c++
				}
			}
			h.Buckets = append(h.Buckets, collector.PromBucket{Upper: ub, Cumulative: c})
		}
		h.Buckets = append(h.Buckets, collector.PromBucket{Upper: math.Inf(1), Cumulative: h.Count})
		for _, v := range values {
			h.Sum += v
		}
		// One scrape holding the histogram after one without it: the
		// interval's delta is the whole histogram.
		const name = "stage_seconds"
		cur := &collector.Scrape{Time: time.Unix(1, 0), Families: map[string]*collector.PromFamily{
			name: {Name: name, Series: []collector.PromSeries{{Hist: h}}}}}
		prev := &collector.Scrape{Time: time.Unix(0, 0)}
		dialect := promdialect.Dialect{Name: "loop", Stages: []promdialect.StageSource{{Stage: "stage", Hist: []promdialect.MetricRef{{Name: name}}}}}
		sample, _ := collector.Derive(prev, cur, dialect)
		return sample.Stages["stage"]
	}
	samples := make([]*event.ServerSample, n)
	for i, o := range per {
		// The queue gauge at the scrape: the requests past the frontend
		// and not yet scheduled.
		at := time.Duration(i+1) * loopScrape
		waiting := 0.0
		for _, r := range reqs {
			if r.arrive+r.frontend <= at && at < r.scheduled {
				waiting++
			}
		}
		samples[i] = &event.ServerSample{
			Time:    time.Unix(1767000000, 0).Add(at),
			Dialect: promdialect.VLLM, Interval: loopScrape, Waiting: &waiting,
			Stages: map[string]event.HistStat{
				"queue":   stat(o.queue, requestBuckets),
				"prefill": stat(o.prefill, requestBuckets),
				"ttft":    stat(o.ttft, ttftBuckets),
			},
		}
	}
	return samples
}

// TestIntervalFitClosedLoop runs a closed loop of 8 streams on 4 slots
// through the attributor with interval statistics only (a vLLM-like server
// without spans), and checks that under 5% of TTFT is left unattributed,
// that the queue and the server wait together are close to the truth's
// queue and frontend, and that the queue, called so only where the queue
// gauge saw requests waiting, is never more than the truth.
func TestIntervalFitClosedLoop(t *testing.T) {
	t.Parallel()
	reqs := closedLoop(42, 8, 4)
	samples := loopIntervals(reqs)

	var noQueue, longQueue int
	for _, r := range reqs {
		switch {
		case r.queue < 5*ms:
			noQueue++
		case r.queue > 200*ms:
			longQueue++
		}
	}
	if len(reqs) < 200 || noQueue < len(reqs)/5 || longQueue < len(reqs)/5 {
		t.Fatalf("the model is not the bimodal case: %d requests, %d without a queue, %d queued over 200ms", len(reqs), noQueue, longQueue)
	}

	p := startPipeline(t, AttributorConfig{Server: "vllm"})
	base := time.Unix(1767000000, 0)
	next := 0 // next interval sample to send
	var withQueue, withWait int
	var ttftSum, unattributedSum, queueSum, trueQueueSum, queueErrSum, waitSum, trueFrontSum time.Duration
	for _, lr := range reqs {
		// Send the samples scraped before this request finished.
		for next < len(samples) && samples[next].Time.Sub(base) <= lr.finish {
			p.send(t, event.NewServer(samples[next]))
			next++
		}
		r := &event.Request{ID: lr.id, Target: "http://loop", Outcome: event.OutcomeOK, Start: base.Add(lr.start),
			Stages: lr.stages, TTFT: lr.ttft, ConnectRTT: lr.connectRTT, ReusedConn: lr.connectRTT == 0}
		p.send(t, event.NewRequest(r))
		var got *event.Request
		for got == nil {
			got = p.next(t).Request
		}
		checkSum(t, got, got.Breakdown)
		ttftSum += got.TTFT
		trueQueueSum += lr.queue
		trueFrontSum += lr.frontend
		for _, s := range got.Breakdown {
			switch s.Stage {
			case event.StageQueue:
				withQueue++
				queueSum += s.Duration
				queueErrSum += (s.Duration - lr.queue).Abs()
				if s.Provenance != event.Estimated {
					t.Errorf("%s: queue from interval means is %s, want estimated", lr.id, s.Provenance)
				}
			case event.StageServerWait:
				withWait++
				waitSum += s.Duration
				queueErrSum += lr.queue
			case event.StageUnattributed:
				unattributedSum += s.Duration
			}
		}
	}
	waitShare := float64(queueSum+waitSum) / float64(ttftSum)
	trueWaitShare := float64(trueQueueSum+trueFrontSum) / float64(ttftSum)
	unattributed := float64(unattributedSum) / float64(ttftSum)
	share, trueShare := float64(queueSum)/float64(ttftSum), float64(trueQueueSum)/float64(ttftSum)
	t.Logf("%d requests (%d without a queue, %d queued over 200ms): queue for %d, server wait for %d, unattributed %.2f%% of TTFT, queue share %.1f%% (truth %.1f%%), queue and server wait %.1f%% (truth: queue and frontend %.1f%%), mean |queue error| %v",
		len(reqs), noQueue, longQueue, withQueue, withWait, 100*unattributed, 100*share, 100*trueShare, 100*waitShare, 100*trueWaitShare, queueErrSum/time.Duration(len(reqs)))
	if unattributed >= 0.05 || unattributed < 0 {
		t.Errorf("unattributed is %.2f%% of TTFT, want under 5%%", 100*unattributed)
	}
	// The queue is called so only where a gauge reading (one a second)
	// saw requests waiting, so it falls short of the truth; what it
	// leaves is the server wait, never a made-up queue.
	if share > trueShare+0.05 || share < trueShare/2 {
		t.Errorf("queue share of TTFT %.1f%%, truth %.1f%%: want between half the truth and 5 points over it", 100*share, 100*trueShare)
	}
	if math.Abs(waitShare-trueWaitShare) > 0.05 {
		t.Errorf("queue and server wait %.1f%% of TTFT, truth (queue and frontend) %.1f%%: want within 5 points", 100*waitShare, 100*trueWaitShare)
	}
}

// TestEndToEndSimIntervalOnly runs the simulator with 4 slots, the real
// probe client with 8 closed-loop streams, the metrics scraper and the
// attributor together, without spans: the breakdown rests on interval
// statistics only. After a warm-up the queue is attributed for at least 95%
// of the requests and under 5% of TTFT is left unattributed.
func TestEndToEndSimIntervalOnly(t *testing.T) {
	t.Parallel()
	const (
		streams = 8
		slots   = 4
		perLoop = 16 // requests per stream
		warmup  = 2 * streams
	)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	profile, err := sim.ProfileByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	truths := map[string]sim.Truth{}
	server, err := sim.New(sim.Config{Profile: profile, MaxNumSeqs: slots, Seed: 11, OnFinish: func(tr sim.Truth) {
		mu.Lock()
		defer mu.Unlock()
		truths[tr.RequestID] = tr
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var serving sync.WaitGroup
	defer serving.Wait()
	defer cancel()
	serving.Go(func() { server.Serve(ctx, ln) })
	base := "http://" + ln.Addr().String()

	client, err := probe.NewClient(probe.ClientConfig{BaseURL: base, Dialect: "openai-chat", Model: server.Model()})
	if err != nil {
		t.Fatal(err)
	}
	prom, err := collector.NewProm(collector.PromConfig{URL: base + "/metrics", Interval: 20 * time.Millisecond, Timeout: promTestTimeout})
	if err != nil {
		t.Fatal(err)
	}
	probeSource := pipeline.SourceFunc(func(ctx context.Context, emit func(event.Event)) error {
		var workers sync.WaitGroup
		for w := range streams {
			workers.Go(func() {
				for i := range perLoop {
					emit(event.NewRequest(client.Do(ctx, probe.RequestSpec{
						ID: fmt.Sprintf("iv-%d-%02d", w, i), Worker: w,
						Prompt: "tell me about latency " + strings.Repeat("please ", w), PromptTokens: 20,
						OutputTokens: 24 + 8*((w+i)%4),
					})))
				}
			})
		}
		workers.Wait()
		return nil
	})
	attributor := NewAttributor(AttributorConfig{Server: "latscope-sim"})
	got, _ := runPipeline(ctx, t, pipeline.Config{Primary: []pipeline.Source{probeSource}, Aux: []pipeline.Source{prom}, Stage: attributor})
	if len(got) != streams*perLoop {
		t.Fatalf("%d requests out, want %d", len(got), streams*perLoop)
	}
	mu.Lock()
	defer mu.Unlock()
	var counted, withQueue int
	var ttftSum, unattributedSum, queueSum, trueQueueSum time.Duration
	for _, r := range got[warmup:] {
		if !r.OK() {
			t.Fatalf("%s: %s (%s)", r.ID, r.Outcome, r.Error)
		}
		checkSum(t, r, r.Breakdown)
		counted++
		ttftSum += r.TTFT
		trueQueueSum += time.Duration(truths[r.ID].QueueUs) * time.Microsecond
		for _, s := range r.Breakdown {
			switch s.Stage {
			case event.StageQueue:
				withQueue++
				queueSum += s.Duration
			case event.StageUnattributed:
				unattributedSum += s.Duration
			}
		}
	}
	attributed := float64(withQueue) / float64(counted)
	unattributed := float64(unattributedSum) / float64(ttftSum)
	t.Logf("%d requests after warm-up: queue attributed for %.1f%%, unattributed %.2f%% of TTFT; queue share %.1f%% (simulator's truth %.1f%%); attributor %+v",
		counted, 100*attributed, 100*unattributed, 100*float64(queueSum)/float64(ttftSum), 100*float64(trueQueueSum)/float64(ttftSum), attributor.Stats())
	if attributed < 0.95 {
		t.Errorf("queue attributed for %.1f%% of requests, want at least 95%%", 100*attributed)
	}
	if unattributed >= 0.05 {
		t.Errorf("unattributed is %.2f%% of TTFT, want under 5%%", 100*unattributed)
	}
}
