//go:build acceptance

package attribute

// The shares of TTFT behind the queue evidence tests: real-time simulator
// runs whose figures depend on the host's speed (go test -tags acceptance).

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/sim"
)

// shares sums the queue and the server wait of run's requests, and the
// simulator's true queue, over their TTFT.
func shares(t *testing.T, run queueRun) (queue, wait, truth float64) {
	t.Helper()
	var ttft, q, w, tq time.Duration
	for _, r := range run.reqs {
		ttft += r.TTFT
		if s, ok := stageOf(r, event.StageQueue); ok {
			q += s.Duration
		}
		if s, ok := stageOf(r, event.StageServerWait); ok {
			w += s.Duration
		}
		tr, ok := run.truth.get(r.ID)
		if !ok {
			t.Fatalf("%s: no truth", r.ID)
		}
		tq += time.Duration(tr.QueueUs) * time.Microsecond
	}
	return float64(q) / float64(ttft), float64(w) / float64(ttft), float64(tq) / float64(ttft)
}

// TestAcceptanceQueueSaturated: 16 streams on 4 slots, for each header
// timing: the requests wait for a slot most of their TTFT, the gauge shows
// it, and the queue is at least 80% of TTFT.
func TestAcceptanceQueueSaturated(t *testing.T) {
	t.Parallel()
	const streams, requests, warmup = 16, 128, 32
	for _, headers := range sim.HeaderTimings() {
		t.Run(string(headers), func(t *testing.T) {
			t.Parallel()
			checkSaturated(t, runQueueEvidence(t, headers, 4, streams, requests, warmup, 20*time.Millisecond), streams)
		})
	}
}

// TestAcceptanceQueueAmpleSlots: one stream, and sixteen, on 64 slots, for
// each header timing: nothing waits for a slot (the simulator's own queue,
// its truth, is at most 1% of TTFT: an arrival during an engine step waits
// in the engine's inbox, not its queue, as in vLLM), so the queue is at
// most 1% of TTFT and no insight speaks of a queue wait.
func TestAcceptanceQueueAmpleSlots(t *testing.T) {
	t.Parallel()
	for _, headers := range sim.HeaderTimings() {
		for _, load := range []struct{ streams, requests, warmup int }{{1, 24, 4}, {16, 96, 32}} {
			t.Run(fmt.Sprintf("%s/c%d", headers, load.streams), func(t *testing.T) {
				t.Parallel()
				run := runQueueEvidence(t, headers, 64, load.streams, load.requests, load.warmup, 100*time.Millisecond)
				checkAmple(t, run, load.streams, 64)
			})
		}
	}
}

// TestAcceptanceQueueH100: the same verdicts on the default h100-7b
// profile with the run command's default lengths (512-token prompts, 128
// output tokens), as `latscope sim --max-num-seqs 64` and `latscope run -c
// 16` see them. The profile's per-step token budget is vLLM's default for
// its OpenAI server on an H100 (8192): with 16 streams on 64 slots a prompt
// finds both a slot and budget at the next step, so nothing queues; with
// 16 streams on 4 slots the queue is still at least 80% of TTFT.
func TestAcceptanceQueueH100(t *testing.T) {
	t.Parallel()
	for _, headers := range sim.HeaderTimings() {
		for _, load := range []struct{ slots, streams, requests, warmup int }{{64, 1, 10, 2}, {64, 16, 80, 16}, {4, 16, 64, 16}} {
			t.Run(fmt.Sprintf("%s/slots%d/c%d", headers, load.slots, load.streams), func(t *testing.T) {
				t.Parallel()
				scrape := 100 * time.Millisecond
				if load.slots < load.streams {
					scrape = 20 * time.Millisecond
				}
				run := runQueueLoad(t, queueLoad{profile: "h100-7b", headers: headers, slots: load.slots,
					streams: load.streams, requests: load.requests, warmup: load.warmup,
					promptTokens: 512, outputTokens: 128, scrape: scrape})
				if load.slots < load.streams {
					checkSaturated(t, run, load.streams)
					return
				}
				checkAmple(t, run, load.streams, load.slots)
			})
		}
	}
}

// checkSaturated: with more streams than slots, the requests wait for a
// slot most of their TTFT (the simulator's truth), and the queue is at
// least 80% of TTFT.
func checkSaturated(t *testing.T, run queueRun, streams int) {
	t.Helper()
	queue, wait, truth := shares(t, run)
	t.Logf("%d requests: queue %.1f%% of TTFT, server wait %.1f%% (the simulator's queue: %.1f%%)", len(run.reqs), 100*queue, 100*wait, 100*truth)
	if truth < 0.80 {
		t.Errorf("the simulator queued only %.1f%% of TTFT with %d streams: the premise (saturated) does not hold", 100*truth, streams)
	}
	if queue < 0.80 {
		t.Errorf("queue %.1f%% of TTFT, want at least 80%% with %d streams on too few slots", 100*queue, streams)
	}
}

// checkAmple: with slots to spare, the simulator queued at most 1% of TTFT
// (the premise), the queue is at most 1% of TTFT, no request has a queue
// the gauge did not show, and no insight speaks of a queue wait.
func checkAmple(t *testing.T, run queueRun, streams, slots int) {
	t.Helper()
	queue, wait, truth := shares(t, run)
	t.Logf("%d requests: queue %.2f%% of TTFT, server wait %.1f%% (the simulator's queue: %.2f%%)", len(run.reqs), 100*queue, 100*wait, 100*truth)
	if truth > 0.01 {
		t.Errorf("the simulator queued %.2f%% of TTFT with %d streams on %d slots: the premise (slots to spare) does not hold", 100*truth, streams, slots)
	}
	if queue > 0.01 {
		t.Errorf("queue %.2f%% of TTFT with %d streams on %d slots, want at most 1%%", 100*queue, streams, slots)
	}
	queued, waited := checkQueueEvidence(t, run)
	if queued > 0 {
		t.Errorf("a queue on %d of %d requests of %d streams on %d slots: the gauge cannot have shown one waiting", queued, len(run.reqs), streams, slots)
	}
	// A request whose whole server window the prefill mean fills has no
	// wait left: at one stream at least one has.
	if streams == 1 && waited == 0 {
		t.Errorf("no server wait on any of %d requests: the server's wait is to be named for what it is", len(run.reqs))
	}
	for _, m := range run.summary.Insights {
		if strings.Contains(m.Message, "queue wait") {
			t.Errorf("insight %q with %d streams on %d slots", m.Message, streams, slots)
		}
	}
}
