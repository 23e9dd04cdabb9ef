package sim

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"
)

// TestQueueMetricsAgreeWithTruth queues requests behind 4 busy batch slots,
// releases the slots so the queue drains, and checks vLLM's queue metrics against
// the truth of every request, which places its wait on the wall clock
// (queued = its first prefill step's start − queue_us): the queue-time
// histogram must sum exactly those waits, and every sample of the waiting
// gauge must lie between the requests surely waiting and those possibly
// waiting while it was taken. Over the whole busy period Little's law then
// holds between gauge and histogram by construction.
func TestQueueMetricsAgreeWithTruth(t *testing.T) {
	t.Parallel()
	const (
		requests = 20 // queued behind the blockers
		slots    = 4  // each held by a blocker until all requests wait
	)
	var (
		mu     sync.Mutex
		truths []Truth
	)
	s, url := startServer(t, Config{Profile: tinyProfile(t), MaxNumSeqs: slots,
		OnFinish: func(tr Truth) { mu.Lock(); truths = append(truths, tr); mu.Unlock() }})
	ctx := testCtx(t, 20*time.Second)
	before := queueHistogram(t, url)

	var samples []gaugeSample
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Millisecond) // the sampling period
		defer tick.Stop()
		for {
			from := time.Now().UnixMicro()
			w := s.Stats().Waiting
			samples = append(samples, gaugeSample{from, time.Now().UnixMicro(), w})
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	}()
	blockCtx, release := context.WithCancel(ctx)
	var blockers, queued sync.WaitGroup
	for range slots {
		blockers.Add(1)
		go func() {
			defer blockers.Done()
			post(blockCtx, url, "/v1/chat/completions", chatBody("block", 20000, true), nil)
		}()
	}
	waitFor(t, func() bool { return s.Stats().Running == slots })
	for i := range requests {
		queued.Add(1)
		go func() {
			defer queued.Done()
			if res := post(ctx, url, "/v1/chat/completions", chatBody("hello", 20, true), map[string]string{RequestIDHeader: fmt.Sprint("q-", i)}); !res.done {
				t.Errorf("request %d: %d %v", i, res.status, res.err)
			}
		}()
	}
	waitFor(t, func() bool { return s.Stats().Waiting == requests })
	release()
	blockers.Wait()
	queued.Wait()
	close(stopSampling)
	<-sampled
	after := queueHistogram(t, url)
	mu.Lock()
	defer mu.Unlock()
	if len(truths) != requests+slots {
		t.Fatalf("%d requests finished, want %d", len(truths), requests+slots)
	}

	// Each wait on the wall clock, in µs; the truth's whole-µs rounding
	// (relative to arrival, then to the Unix epoch) leaves under 3 µs of
	// doubt at each end.
	waits := make([]waitSpan, 0, len(truths))
	var sumUs int64 // of the completed requests: the histogram skips aborted ones
	for _, tr := range truths {
		scheduled := tr.PrefillSteps[0].StartUnixUs
		waits = append(waits, waitSpan{scheduled - tr.QueueUs, scheduled})
		if tr.FinishReason != "abort" {
			sumUs += tr.QueueUs
		}
	}
	if n := after.count - before.count; n != requests {
		t.Errorf("queue histogram counted %d requests, want %d", n, requests)
	}
	if got := after.sum - before.sum; math.Abs(got*1e6-float64(sumUs)) > slack*requests {
		t.Errorf("queue histogram sums %.6fs of waiting, the truth %dus", got, sumUs)
	}
	peak := checkQueueGauge(t, waits, samples, requests)
	if testing.Verbose() {
		fmt.Printf("%d requests, peak queue %d, %d gauge samples, %.1f ms queued in all\n", requests, peak, len(samples), float64(sumUs)/1000)
	}
}

// gaugeSample is one reading of the waiting gauge, taken at some instant
// in [from, to] (Unix µs).
type gaugeSample struct {
	from, to int64
	waiting  int
}

// waitSpan is one request's wait in the queue, on the wall clock (Unix µs).
type waitSpan struct{ from, to int64 }

// slack is the doubt at each end of a wait: the truth's whole-µs rounding
// (relative to arrival, then to the Unix epoch) leaves under 3 µs.
const slack = 3

// checkQueueGauge checks that want requests waited at once at the peak
// (returned), and that every gauge sample lies between the waits that
// surely and those that possibly covered it.
func checkQueueGauge(t *testing.T, waits []waitSpan, samples []gaugeSample, want int) int {
	t.Helper()
	peak := 0
	for _, w := range waits {
		n := 0 // waiting just after w began
		for _, o := range waits {
			if o.from <= w.from && w.from < o.to {
				n++
			}
		}
		peak = max(peak, n)
	}
	if peak != want {
		t.Errorf("at most %d requests waited at once, want all %d", peak, want)
	}
	for _, sm := range samples {
		surely, possibly := 0, 0
		for _, w := range waits {
			if w.from+slack <= sm.from && w.to-slack > sm.to {
				surely++
			}
			if w.from-slack <= sm.to && w.to+slack > sm.from {
				possibly++
			}
		}
		if sm.waiting < surely || sm.waiting > possibly {
			t.Errorf("gauge read %d waiting between %d and %d us; the truth says %d to %d", sm.waiting, sm.from, sm.to, surely, possibly)
		}
	}
	return peak
}

type histSnap struct {
	count uint64
	sum   float64
}

func queueHistogram(t *testing.T, url string) histSnap {
	t.Helper()
	h := scrape(t, url)["vllm:request_queue_time_seconds"].GetMetric()[0].GetHistogram()
	return histSnap{h.GetSampleCount(), h.GetSampleSum()}
}

// TestQueueDrainsWhenClientsLeave checks that requests abandoned while
// queued leave the queue (vLLM aborts them).
func TestQueueDrainsWhenClientsLeave(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	var once sync.Once
	s, url := startServer(t, Config{Profile: tinyProfile(t), MaxNumSeqs: 1,
		OnFrame: func(FrameInfo) { once.Do(func() { close(started) }) }})
	ctx, cancel := context.WithCancel(testCtx(t, 10*time.Second))
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() { defer wg.Done(); post(ctx, url, "/v1/chat/completions", chatBody("hi", 20000, true), nil) }()
	}
	waitClosed(t, ctx, started, "the first stream")
	waitFor(t, func() bool { return s.Stats().Waiting == 4 })
	cancel()
	wg.Wait()
	waitFor(t, func() bool { st := s.Stats(); return st.Waiting == 0 && st.Running == 0 })
}
