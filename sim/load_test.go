package sim

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestQueueingLittlesLaw runs 16 closed-loop clients against 4 batch slots:
// the queue must build up, the queue-time histogram must account for it, and
// Little's law (L = λW) must hold between the sampled queue length and the
// histogram's arrival rate and mean wait.
func TestQueueingLittlesLaw(t *testing.T) {
	// Not parallel: timing-sensitive, so it runs alone.
	const warmUp = 32 // requests finished before measuring: every client has queued
	finished := make(chan struct{}, warmUp)
	s, url := startServer(t, Config{Profile: tinyProfile(t), MaxNumSeqs: 4, OnFinish: func(Truth) {
		select {
		case finished <- struct{}{}:
		default:
		}
	}})
	ctx, cancel := context.WithCancel(testCtx(t, 30*time.Second))
	defer cancel()
	var wg sync.WaitGroup
	for c := 0; c < 16; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				post(ctx, url, "/v1/chat/completions", chatBody("hello", 20, true), nil)
			}
		}()
	}
	defer wg.Wait()
	defer cancel()

	for range warmUp {
		select {
		case <-finished:
		case <-ctx.Done():
			t.Fatal("the warm-up requests did not finish")
		}
	}
	before := queueHistogram(t, url)
	start := time.Now()
	var samples, sum, peak int
	tick := time.NewTicker(2 * time.Millisecond) // the sampling period
	defer tick.Stop()
	for time.Since(start) < 2*time.Second {
		w := s.Stats().Waiting
		sum += w
		peak = max(peak, w)
		samples++
		<-tick.C
	}
	elapsed := time.Since(start)
	after := queueHistogram(t, url)

	if raceEnabled {
		t.Skip("timing not asserted under the race detector")
	}
	if peak < 8 {
		t.Errorf("peak waiting = %d, want >= 8", peak)
	}
	n := after.count - before.count
	if n < 20 {
		t.Fatalf("only %d requests finished in the window", n)
	}
	meanL := float64(sum) / float64(samples)
	lambda := float64(n) / elapsed.Seconds()
	meanW := (after.sum - before.sum) / float64(n)
	if meanW < 0.001 {
		t.Errorf("mean queue time %.4fs: the histogram does not show the waiting", meanW)
	}
	ratio := lambda * meanW / meanL
	if ratio < 0.85 || ratio > 1.15 {
		t.Errorf("Little's law: L = %.2f, λW = %.1f/s × %.4fs = %.2f (ratio %.2f)", meanL, lambda, meanW, lambda*meanW, ratio)
	}
	if testing.Verbose() {
		fmt.Printf("L=%.2f λ=%.1f/s W=%.4fs λW=%.2f peak=%d samples=%d\n", meanL, lambda, meanW, lambda*meanW, peak, samples)
	}
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
