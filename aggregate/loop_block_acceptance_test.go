//go:build acceptance

package aggregate_test

// Acceptance tier (go test -tags acceptance -p 1): the event-loop stall at
// its real size. The simulator's truth lists every stretch a tokenization
// held its shared loop (loop_blocked); the stall detector, fed the probe's
// records, must report most of those longer than 2× the streams' normal
// gap as front-end blocks, and with a tokenizer pool none at all.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latscope/latscope/aggregate/internal/stall"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/sim"
)

// loopBlockRun streams four long decodes and, once they all decode, sends
// long prompts one after another through them, then feeds every record to
// a stall detector.
type loopBlockRun struct {
	blocks  []window // the truth's loop-blocked stretches
	normal  time.Duration
	markers []event.Marker
	watch   *busyWatch
}

func loopBlockScenario(t *testing.T, pool, longPrompts int) loopBlockRun {
	t.Helper()
	run := loopBlockRun{watch: watchBusy(t)}
	defer run.watch.done()
	var (
		mu     sync.Mutex
		truths []sim.Truth
		frames = map[string]int{}
		ready  = make(chan struct{})
		once   sync.Once
	)
	onFrame := func(f sim.FrameInfo) { // on the server's loop, in flush order
		mu.Lock()
		defer mu.Unlock()
		frames[f.RequestID]++
		started := 0
		for i := range decodeStreams {
			if frames[decodeID(i)] >= 40 {
				started++
			}
		}
		if started == decodeStreams {
			once.Do(func() { close(ready) })
		}
	}
	url := startSim(t, sim.Config{Profile: slowTokenizerProfile(t), TokenizerPool: pool, Seed: 1, OnFrame: onFrame,
		OnFinish: func(tr sim.Truth) { mu.Lock(); truths = append(truths, tr); mu.Unlock() }})
	client, err := probe.NewClient(probe.ClientConfig{BaseURL: url, Dialect: probe.DialectOpenAIChat, Model: sim.DefaultModel, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	long, err := probe.NewPromptSource(ctx, probe.PromptConfig{PromptTokens: probe.Length{Mean: 8192}, OutputTokens: probe.Length{Mean: 4}, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	short, err := probe.NewPromptSource(ctx, probe.PromptConfig{PromptTokens: probe.Length{Mean: 32}, OutputTokens: probe.Length{Mean: 1200}, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	// The detector is told of each request as it goes out, as the Runner
	// tells it: a stall waits for the records of the requests then in
	// flight, which may hold its evidence.
	det := stall.New(stall.Config{Server: simServer})
	decoding := make(chan *event.Request, decodeStreams)
	for i := range decodeStreams {
		det.Sent(decodeID(i), time.Now())
		go func() {
			p, pt, ot := short.Next(uint64(i))
			decoding <- client.Do(ctx, probe.RequestSpec{ID: decodeID(i), Prompt: p, PromptTokens: pt, OutputTokens: ot})
		}()
	}
	// Send the long prompts once every stream decodes (an event, not a
	// sleep): a block before the streams' first tokens is no gap of
	// theirs, so nothing could find it.
	select {
	case <-ready:
	case <-ctx.Done():
		t.Fatal("the decode streams never got going")
	}
	var longRecs []*event.Request
	for i := range longPrompts {
		p, pt, ot := long.Next(uint64(i))
		id := fmt.Sprint("long-", i)
		det.Sent(id, time.Now())
		r := client.Do(ctx, probe.RequestSpec{ID: id, Prompt: p, PromptTokens: pt, OutputTokens: ot})
		if !r.OK() {
			t.Fatalf("long prompt %d: %s %s", i, r.Outcome, r.Error)
		}
		longRecs = append(longRecs, r)
	}
	// The records reach the detector in the order the requests finished,
	// as the Runner's do: the long prompts' first.
	for _, r := range longRecs {
		run.markers = append(run.markers, det.Add(r)...)
	}
	var medians []time.Duration
	for range decodeStreams {
		r := <-decoding
		if !r.OK() {
			t.Fatalf("decode stream failed: %s %s", r.Outcome, r.Error)
		}
		medians = append(medians, medianGap(r))
		run.markers = append(run.markers, det.Add(r)...)
	}
	run.markers = append(run.markers, det.Flush()...)
	slices.Sort(medians)
	run.normal = medians[len(medians)/2]
	mu.Lock()
	defer mu.Unlock()
	for _, tr := range truths {
		if b := tr.LoopBlocked; b != nil {
			run.blocks = append(run.blocks, window{time.UnixMicro(b.StartUnixUs), time.UnixMicro(b.EndUnixUs)})
		}
	}
	return run
}

// TestStallDetectorFindsLoopBlocks: of the true loop blocks longer than 2×
// the normal gap, at least 80% are reported as front-end blocks. A block
// through a good part of which the host held this process up is left out
// not the server, decided when frames went out); the test fails, saying
// so, when that leaves too few to judge.
func TestStallDetectorFindsLoopBlocks(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("timing on the calibrated profile: not under -short or -race")
	}
	run := loopBlockScenario(t, 0, 8)
	var judged, found int
	var report []string
	for _, b := range run.blocks {
		if b.to.Sub(b.from) <= 2*run.normal {
			continue
		}
		if run.watch.heldThrough(b) {
			report = append(report, fmt.Sprintf("%s: %v, the host held the process up through it", b.from.Format("15:04:05.000"), b.to.Sub(b.from).Round(time.Millisecond)))
			continue
		}
		judged++
		hit := false
		for _, m := range run.markers {
			if m.Cause == event.StallFrontEndBlock && markerWindow(m).overlap(b) > 0 {
				hit = true
			}
		}
		if hit {
			found++
		}
		report = append(report, fmt.Sprintf("%s: %v, reported %t", b.from.Format("15:04:05.000"), b.to.Sub(b.from).Round(time.Millisecond), hit))
	}
	t.Logf("normal gap %v; blocks: %s\nmarkers:\n%s", run.normal, strings.Join(report, "; "), messages(run.markers))
	if judged < 4 {
		t.Fatalf("only %d loop blocks over 2× the normal gap to judge (this tier needs a host that keeps pace): %s", judged, strings.Join(report, "; "))
	}
	if 5*found < 4*judged {
		t.Errorf("%d of %d loop blocks over 2× the normal gap reported as front-end blocks, want at least 80%%", found, judged)
	}
}

// TestStallDetectorNoLoopBlocksWithPool: with a tokenizer pool the truth
// lists no loop block, and no pause is called a front-end block but where
// the host held the whole process (the simulator's loop with it) up.
func TestStallDetectorNoLoopBlocksWithPool(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("timing on the calibrated profile: not under -short or -race")
	}
	run := loopBlockScenario(t, 4, 8)
	if len(run.blocks) > 0 {
		t.Errorf("the truth lists %d loop blocks with a tokenizer pool", len(run.blocks))
	}
	for _, m := range run.markers {
		if m.Cause != event.StallFrontEndBlock {
			continue
		}
		// A host that held this whole process up held the simulator's
		// loop too: its frames piled up as a blocked loop's do.
		if run.watch.during(markerWindow(m)) {
			t.Logf("the host held the process up around: %s", m.Message)
			continue
		}
		t.Errorf("with a tokenizer pool, a pause called a front-end block: %s", m.Message)
	}
}
