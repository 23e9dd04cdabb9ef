package sim

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// stallProfile is tiny with a slow tokenizer: one long prompt tokenizes for
// about 150 ms, far longer than any scheduling hiccup, while streams decode
// a token every millisecond or so.
func stallProfile(t *testing.T) Profile {
	p := tinyProfile(t)
	p.TokenizePerToken = 37500 * time.Nanosecond
	return p
}

// stallPromptTokens is the long prompt's length: ~150 ms of tokenization.
const stallPromptTokens = 4000

// stallRun is what a stall scenario saw.
type stallRun struct {
	flushes map[string][]time.Time // each background stream's frame flush times, from OnFrame
	long    Truth                  // the long prompt's truth
}

// stallScenario runs background streams until each has flushed a few
// frames, sends one long prompt, and lets the streams run until each has
// flushed a frame after the long request finished: every wait is on an
// event, so the long tokenization lands in the middle of every stream.
func stallScenario(t *testing.T, pool int) stallRun {
	const (
		background = 4
		trigger    = 10
	)
	var (
		mu         sync.Mutex
		run        = stallRun{flushes: map[string][]time.Time{}}
		longDone   bool
		frozen     bool // set when the scenario returns: the server may still flush frames to clients that hung up
		afterLong  = map[string]bool{}
		ready      = make(chan struct{})
		settled    = make(chan struct{})
		readyOnce  sync.Once
		settleOnce sync.Once
	)
	onFrame := func(f FrameInfo) {
		mu.Lock()
		defer mu.Unlock()
		if f.RequestID == "long" || frozen {
			return
		}
		run.flushes[f.RequestID] = append(run.flushes[f.RequestID], f.At)
		if longDone {
			afterLong[f.RequestID] = true
		}
		started := 0
		for _, fl := range run.flushes {
			if len(fl) >= trigger {
				started++
			}
		}
		if started == background {
			readyOnce.Do(func() { close(ready) })
		}
		if len(afterLong) == background {
			settleOnce.Do(func() { close(settled) })
		}
	}
	onFinish := func(tr Truth) {
		if tr.RequestID == "long" {
			mu.Lock()
			longDone = true
			mu.Unlock()
		}
	}
	_, url := startServer(t, Config{Profile: stallProfile(t), TokenizerPool: pool, OnFrame: onFrame, OnFinish: onFinish})
	ctx := testCtx(t, 20*time.Second)
	bgCtx, stopBG := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range background {
		wg.Add(1)
		go func() {
			defer wg.Done()
			post(bgCtx, url, "/v1/chat/completions", chatBody("tell me a story", 20000, true),
				map[string]string{RequestIDHeader: fmt.Sprintf("bg-%d", i)})
		}()
	}
	defer wg.Wait()
	defer stopBG()
	waitClosed(t, ctx, ready, "the background streams")
	long := post(ctx, url, "/v1/chat/completions", chatBody(promptOf(stallPromptTokens), 1, true),
		map[string]string{RequestIDHeader: "long", TruthHeader: "1"})
	if !long.done {
		t.Fatalf("long prompt: %d %v", long.status, long.err)
	}
	waitClosed(t, ctx, settled, "frames after the long prompt")
	stopBG()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	frozen = true
	run.long = lastTruth(t, long)
	return run
}

// gapsOver returns the stream's flush gaps of at least d.
func gapsOver(flushes []time.Time, d time.Duration) []interval {
	var out []interval
	for i := 1; i < len(flushes); i++ {
		if flushes[i].Sub(flushes[i-1]) >= d {
			out = append(out, interval{flushes[i-1], flushes[i]})
		}
	}
	return out
}

func maxGap(flushes []time.Time) time.Duration {
	var g time.Duration
	for i := 1; i < len(flushes); i++ {
		g = max(g, flushes[i].Sub(flushes[i-1]))
	}
	return g
}

type interval struct{ from, to time.Time }

// stalledTogether reports whether one instant lies in a gap of every stream.
// If the gaps have a common instant, the latest start among them is one, so
// the starts are the only candidates.
func stalledTogether(gaps [][]interval) bool {
	for _, stream := range gaps {
		for _, candidate := range stream {
			p := candidate.from
			all := true
			for _, other := range gaps {
				in := false
				for _, g := range other {
					in = in || (!p.Before(g.from) && p.Before(g.to))
				}
				all = all && in
			}
			if all {
				return true
			}
		}
	}
	return false
}

// TestTokenizerOnLoopStallsOtherStreams: tokenizing on the shared loop
// blocks it, so no stream's frame can be flushed while a long prompt
// tokenizes: every stream has a flush gap at least as long as that
// tokenization (its truth), and the gaps coincide.
func TestTokenizerOnLoopStallsOtherStreams(t *testing.T) {
	t.Parallel()
	run := stallScenario(t, 0)
	tok := time.Duration(run.long.TokenizeUs) * time.Microsecond
	// The truth lists the stretch the tokenization held the loop: the
	// tokenize stage's own, on the wall clock.
	if b := run.long.LoopBlocked; b == nil || time.Duration(b.EndUnixUs-b.StartUnixUs)*time.Microsecond < tok-time.Microsecond {
		t.Errorf("the long prompt's truth lists the loop blocked %+v, want its %v tokenization", b, tok)
	}
	var gaps [][]interval
	for id, fl := range run.flushes {
		g := gapsOver(fl, tok)
		if len(g) == 0 {
			t.Errorf("%s: largest flush gap %v, want at least the long prompt's tokenization, %v", id, maxGap(fl), tok)
		}
		gaps = append(gaps, g)
	}
	if !t.Failed() && !stalledTogether(gaps) {
		t.Errorf("the streams' %v+ gaps do not coincide: %v", tok, gaps)
	}
	if testing.Verbose() {
		fmt.Printf("pool 0: tokenization %v; every stream stalled that long, together\n", tok)
	}
}

// TestTruthListsNoLoopBlockWithPool: with a tokenizer pool the long
// prompt's tokenization never held the loop, and its truth says so.
func TestTruthListsNoLoopBlockWithPool(t *testing.T) {
	t.Parallel()
	run := stallScenario(t, 2)
	if b := run.long.LoopBlocked; b != nil {
		t.Errorf("the truth lists the loop blocked %+v, though the prompt tokenized on the pool", b)
	}
}
