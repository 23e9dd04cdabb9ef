//go:build acceptance

package probe_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/sim"
)

// The scenario of the acceptance tests of the stall detector against the
// simulator's event loop (sim_integration_acceptance_test.go): four decode
// streams held up by one long prompt's tokenization.

// Detector defaults the stall tests reason with (probe.StallConfig's zero
// value): a gap counts above stallFactor × the stream's median gap and
// above stallMinGap, and stallMinStreams streams must share the pause.
const (
	stallFactor     = 5
	stallMinGap     = 20 * time.Millisecond
	stallMinStreams = 3
	decodeStreams   = 4
)

// slowTokenizerProfile is h100-7b with a tokenizer about 20 times slower
// (a pure-Python tokenizer with a long chat template): one 8K-token prompt
// then takes about 100 ms to tokenize, in one piece. A burst of faster
// prompts would block the loop as long in total, but on a busy machine
// its requests reach the loop spread out and decode frames slip between
// their tokenizations, so whether the streams pause together would depend
// on the machine; one long tokenization does not.
func slowTokenizerProfile(t *testing.T) sim.Profile {
	t.Helper()
	p, err := sim.ProfileByName("h100-7b")
	if err != nil {
		t.Fatal(err)
	}
	p.Name = "h100-7b-slow-tokenizer"
	p.TokenizePerToken = 12 * time.Microsecond
	return p
}

// stallRun is what stallScenario saw: the decode streams' records, the
// server's flush time of each of their content frames, every request's
// ground truth, and the stall markers the detector made of the records.
type stallRun struct {
	recs    []*event.Request
	flushes map[string][]time.Time
	truths  map[string]sim.Truth
	longID  string
	markers []event.Marker
	watch   *busyWatch // when the host held this process up
}

// stallScenario streams four long decodes and, once each has had 40
// frames flushed, sends one 8K-token prompt. With the tokenizer on the
// server's event loop, that prompt's tokenization holds every stream's
// frames for about 100 ms; with a tokenizer pool it holds none.
func stallScenario(t *testing.T, tokenizerPool int) stallRun {
	t.Helper()
	run := stallRun{flushes: map[string][]time.Time{}, truths: map[string]sim.Truth{}, longID: "long", watch: watchBusy(t)}
	defer run.watch.done()
	var (
		mu sync.Mutex
		// frozen is set when the scenario returns: the server may still
		// flush to, or finish, a request whose client has gone.
		frozen       bool
		ready        = make(chan struct{})
		longFinished = make(chan struct{})
		once         sync.Once
	)
	onFrame := func(f sim.FrameInfo) { // on the server's loop, in flush order
		mu.Lock()
		defer mu.Unlock()
		if frozen {
			return
		}
		run.flushes[f.RequestID] = append(run.flushes[f.RequestID], f.At)
		started := 0
		for i := range decodeStreams {
			if len(run.flushes[decodeID(i)]) >= 40 {
				started++
			}
		}
		if started == decodeStreams {
			once.Do(func() { close(ready) })
		}
	}
	onFinish := func(tr sim.Truth) {
		mu.Lock()
		defer mu.Unlock()
		if frozen {
			return
		}
		run.truths[tr.RequestID] = tr
		if tr.RequestID == run.longID {
			close(longFinished)
		}
	}
	url := startSim(t, sim.Config{Profile: slowTokenizerProfile(t), TokenizerPool: tokenizerPool, Seed: 1, OnFrame: onFrame, OnFinish: onFinish})
	client, err := probe.NewClient(probe.ClientConfig{BaseURL: url, Dialect: probe.DialectOpenAIChat, Model: sim.DefaultModel, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	ctx := t.Context()
	long, err := probe.NewPromptSource(ctx, probe.PromptConfig{PromptTokens: probe.Length{Mean: 8192}, OutputTokens: probe.Length{Mean: 4}, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	short, err := probe.NewPromptSource(ctx, probe.PromptConfig{PromptTokens: probe.Length{Mean: 32}, OutputTokens: probe.Length{Mean: 300}, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	decoding := make(chan *event.Request, decodeStreams)
	for i := range decodeStreams {
		go func() {
			p, pt, ot := short.Next(uint64(i))
			decoding <- client.Do(ctx, probe.RequestSpec{ID: decodeID(i), Prompt: p, PromptTokens: pt, OutputTokens: ot})
		}()
	}
	// Land the prompt well into the decodes (an event, not a sleep), so
	// each stream's median gap is its normal decode step.
	select {
	case <-ready:
	case <-ctx.Done():
		t.Fatal("the decode streams never got going")
	}
	longCtx, cancelLong := context.WithCancel(ctx)
	longDone := make(chan *event.Request, 1)
	go func() {
		p, pt, ot := long.Next(0)
		longDone <- client.Do(longCtx, probe.RequestSpec{ID: run.longID, Prompt: p, PromptTokens: pt, OutputTokens: ot})
	}()
	det := probe.NewStallDetector(probe.StallConfig{})
	for range decodeStreams {
		r := <-decoding
		if !r.OK() {
			t.Fatalf("decode stream failed: %s %s", r.Outcome, r.Error)
		}
		run.recs = append(run.recs, r)
		run.markers = append(run.markers, det.Add(r)...)
	}
	cancelLong() // done or not, it is a request of the probe's: evidence
	longReq := <-longDone
	run.markers = append(run.markers, det.Add(longReq)...)
	run.markers = append(run.markers, det.Flush()...)
	if longReq.OK() { // its truth comes once the server's handler ends, after the client saw the end
		select {
		case <-longFinished:
		case <-ctx.Done():
			t.Fatal("the long prompt's truth never came")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	frozen = true
	for _, r := range run.recs {
		if n := len(run.flushes[r.ID]); n != len(r.Chunks) {
			t.Fatalf("%s: the server flushed %d content frames, the probe saw %d chunks", r.ID, n, len(r.Chunks))
		}
	}
	return run
}

func decodeID(i int) string { return fmt.Sprintf("decode-%d", i) }

// at is when the probe received chunk j of r.
func at(r *event.Request, j int) time.Time { return r.Start.Add(r.Chunks[j].At) }

// medianGap is the median of r's gaps between content chunks.
func medianGap(r *event.Request) time.Duration {
	gaps := r.ITLs()
	slices.Sort(gaps)
	return gaps[len(gaps)/2]
}
