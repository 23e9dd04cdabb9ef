package attribute

// Queue only on evidence, against the simulator: where nothing queued, the
// server's unsplit wait is a server wait, never a queue made up from its
// front end. The verdicts here are structural (which stages, which
// evidence), so they hold on a slow, busy host; the shares of TTFT, which
// depend on timing, are in queue_evidence_acceptance_test.go.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/collector"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/sim"
	"github.com/latscope/latscope/sim/simtest"
)

// queueRun is one run of closed-loop streams against the simulator with its
// metrics scraped, through the attributor, after warm-up.
type queueRun struct {
	reqs    []*event.Request
	truth   *truths
	summary aggregate.Summary
}

// runQueueEvidence runs streams closed-loop streams of requests (the first
// warmup left out) against a tiny simulator with slots batch slots and the
// given header timing, scraping its metrics every scrape.
func runQueueEvidence(t *testing.T, headers sim.HeaderTiming, slots, streams, requests, warmup int, scrape time.Duration) queueRun {
	t.Helper()
	return runQueueLoad(t, queueLoad{headers: headers, slots: slots, streams: streams, requests: requests, warmup: warmup,
		scrape: scrape, promptTokens: 32, outputTokens: 24})
}

// queueLoad is one queue evidence run: the simulator (profile, zero: tiny;
// slots; header timing), the closed-loop load and the metrics scrape.
type queueLoad struct {
	profile                    string
	headers                    sim.HeaderTiming
	slots                      int
	streams, requests, warmup  int
	promptTokens, outputTokens int
	scrape                     time.Duration
}

// runQueueLoad runs l through the attributor, as runQueueEvidence does.
func runQueueLoad(t *testing.T, l queueLoad) queueRun {
	t.Helper()
	ts := &truths{}
	cfg := sim.Config{MaxNumSeqs: l.slots, Seed: 13, Headers: l.headers, OnFinish: ts.add}
	var url string
	if l.profile == "" {
		url = serveSim(t, cfg)
	} else {
		prof, err := sim.ProfileByName(l.profile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Profile = prof
		url = simtest.Serve(t, cfg)
	}
	found, err := probe.Detect(context.Background(), probe.Endpoint{BaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	client, err := probe.NewClient(probe.ClientConfig{BaseURL: url, Dialect: probe.DialectOpenAIChat, Model: sim.DefaultModel, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	prom, err := collector.NewProm(collector.PromConfig{URL: url + "/metrics", Interval: l.scrape, Timeout: promTestTimeout})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	prompts, err := probe.NewPromptSource(ctx, probe.PromptConfig{PromptTokens: probe.Length{Mean: l.promptTokens}, OutputTokens: probe.Length{Mean: l.outputTokens}, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	runner, err := probe.NewRunner(client, probe.LoadConfig{Concurrency: l.streams, Requests: l.requests}, prompts)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := runPipeline(ctx, t, pipeline.Config{Primary: []pipeline.Source{runner}, Aux: []pipeline.Source{prom},
		Stage: NewAttributor(AttributorConfig{Server: found.Server})})
	if len(got) != l.requests {
		t.Fatalf("%d requests out, want %d", len(got), l.requests)
	}
	slices.SortFunc(got, func(a, b *event.Request) int { return a.Start.Compare(b.Start) })
	agg := aggregate.New(aggregate.Config{})
	for _, r := range got[l.warmup:] {
		if !r.OK() {
			t.Fatalf("%s: %s (%s)", r.ID, r.Outcome, r.Error)
		}
		checkSum(t, r, r.Breakdown)
		agg.Add(event.NewRequest(r))
	}
	return queueRun{reqs: got[l.warmup:], truth: ts, summary: agg.Summary()}
}

// stageOf returns r's breakdown stage s, if it has one.
func stageOf(r *event.Request, s event.Stage) (event.StageTiming, bool) {
	i := slices.IndexFunc(r.Breakdown, func(b event.StageTiming) bool { return b.Stage == s })
	if i < 0 {
		return event.StageTiming{}, false
	}
	return r.Breakdown[i], true
}

// TestQueueEvidenceAmpleSlots: one stream and sixteen on 64 slots, for each
// header timing the simulator has: nothing waits for a slot, so the queue
// gauge never shows a request waiting (an arrival during an engine step
// waits in the engine's inbox, not its queue, as in vLLM), and no request
// has a queue. That holds however slow the host: the gauge counts only
// requests the scheduler left without a slot. Whether a server wait is left
// beside the prefill, and the shares of TTFT, depend on how fast the host
// runs: those are checked in the acceptance tier
// (TestAcceptanceQueueAmpleSlots).
func TestQueueEvidenceAmpleSlots(t *testing.T) {
	t.Parallel()
	for _, headers := range sim.HeaderTimings() {
		for _, load := range []struct{ streams, requests, warmup int }{{1, 14, 2}, {16, 48, 16}} {
			t.Run(fmt.Sprintf("%s/c%d", headers, load.streams), func(t *testing.T) {
				t.Parallel()
				// A scrape every 100 ms: the gauge is read often enough to
				// fit the server's interval means.
				run := runQueueEvidence(t, headers, 64, load.streams, load.requests, load.warmup, 100*time.Millisecond)
				if queued, _ := checkQueueEvidence(t, run); queued > 0 {
					t.Errorf("a queue on %d of %d requests of %d streams on 64 slots, where none waits for a slot", queued, len(run.reqs), load.streams)
				}
			})
		}
	}
}

// checkQueueEvidence fails each queue stage of run that does not name the
// gauge's evidence, and returns how many requests had a queue and how many
// a server wait.
func checkQueueEvidence(t *testing.T, run queueRun) (queued, waited int) {
	t.Helper()
	for _, r := range run.reqs {
		if w, ok := stageOf(r, event.StageServerWait); ok && w.Duration > 0 {
			waited++
		}
		q, ok := stageOf(r, event.StageQueue)
		if !ok {
			continue
		}
		queued++
		if !strings.Contains(q.Source, "vllm:num_requests_waiting showed requests waiting") {
			t.Errorf("%s: queue %v without the gauge's evidence: %s", r.ID, q.Duration, q.Source)
		}
	}
	t.Logf("%d requests: a server wait on %d, a queue on %d", len(run.reqs), waited, queued)
	return queued, waited
}
