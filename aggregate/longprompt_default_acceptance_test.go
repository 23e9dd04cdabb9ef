//go:build acceptance

package aggregate_test

// Acceptance tier (go test -tags acceptance -p 1): the demo's long-prompt
// load on the default profile (h100-7b, an 8,192-token step budget),
// judged against the simulator's truth.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/sim"
)

// longPromptRun is the demo's load of 30,000-token prompts (12 in flight,
// 128 tokens out, as `latscope demo --prompt-tokens 30000` sends) against
// the default profile, with what the truth says of it.
type longPromptRun struct {
	res    runResult
	blocks []window // the truth's loop-blocked stretches
	steps  []window // the truth's prefill steps
	watch  *busyWatch
}

func longPromptScenario(t *testing.T, pool int) longPromptRun {
	t.Helper()
	truth := newGroundTruth()
	url := startSim(t, truth.hook(sim.Config{Profile: h100(t), TokenizerPool: pool, Seed: 1}))
	run := longPromptRun{watch: watchBusy(t)}
	run.res = runLoad(t, simClient(t, url, nil), probe.LoadConfig{Concurrency: 12, Duration: 8 * time.Second, Drain: 30 * time.Second},
		prompts(t, 30000, 128, 1), nil)
	run.watch.done()
	run.steps = truth.prefillSteps()
	truth.mu.Lock()
	defer truth.mu.Unlock()
	for _, tr := range truth.truths {
		if b := tr.LoopBlocked; b != nil {
			run.blocks = append(run.blocks, window{us(b.StartUnixUs), us(b.EndUnixUs)})
		}
	}
	return run
}

// hidden reports whether w lies inside one engine step that prefilled: no
// stream was due a frame in it, so holding the frames held nothing back.
func (r longPromptRun) hidden(w window) bool {
	for _, st := range r.steps {
		if !st.from.After(w.from) && !st.to.Before(w.to) {
			return true
		}
	}
	return false
}

// streamsPausedOver reports whether at least two streams, and at least
// half of those reading across w, have a gap over it of 1.5 times their
// median and 10 ms over it: the probe could see w.
func streamsPausedOver(recs []*event.Request, w window) bool {
	streaming, paused := 0, 0
	for _, r := range recs {
		if len(r.Chunks) < 4 {
			continue
		}
		if !r.Start.Add(r.Chunks[0].At).Before(w.from) || !r.Start.Add(r.Chunks[len(r.Chunks)-1].At).After(w.to) {
			continue
		}
		streaming++
		gaps, m := r.ITLs(), medianGap(r)
		for i, g := range gaps {
			from, to := r.Start.Add(r.Chunks[i].At), r.Start.Add(r.Chunks[i+1].At)
			if !from.After(w.from) && !to.Before(w.to) && 2*g >= 3*m && g >= m+10*time.Millisecond {
				paused++
				break
			}
		}
	}
	return paused >= 2 && 2*paused >= streaming
}

// TestStallCausesLongPromptsDefaultProfile: the demo's 30K-token load on
// the default profile, tokenizer on the loop. Every loop block the probe
// could see is named a front-end block (at least 80%); a block that lies
// inside a prefill step (the next queued prompt's 8,192-token chunk, about
// 300 ms, starts as the finished request's replacement arrives) held no
// frame back and is no pause of the streams; every pause the truth's
// prefill steps fill is prefill interference, never a front-end block.
func TestStallCausesLongPromptsDefaultProfile(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("timing on the calibrated profile: not under -short or -race")
	}
	run := longPromptScenario(t, 0)
	stalls := run.res.stalls()
	var judged, found, hidden, unseen int
	var report []string
	for _, b := range run.blocks {
		switch {
		case run.watch.heldThrough(b):
			continue
		case run.hidden(b):
			hidden++
			continue
		case !streamsPausedOver(run.res.recs, b):
			unseen++
			continue
		}
		judged++
		hit := false
		for _, m := range stalls {
			if m.Cause == event.StallFrontEndBlock && markerWindow(m).overlap(b) > 0 {
				hit = true
			}
		}
		if hit {
			found++
		}
		report = append(report, fmt.Sprintf("%s: %v, named %t", b.from.Format("15:04:05.000"), b.to.Sub(b.from).Round(time.Millisecond), hit))
	}
	for _, m := range stalls {
		mw := markerWindow(m)
		if run.watch.during(mw) {
			continue
		}
		block := false
		for _, b := range run.blocks {
			block = block || b.overlap(mw) > 0
		}
		if m.Cause == event.StallFrontEndBlock && !block {
			t.Errorf("a front-end block where the truth lists no loop block: %s", m.Message)
		}
		var inSteps time.Duration
		for _, st := range run.steps {
			inSteps += st.overlap(mw)
		}
		if !block && 2*inSteps >= mw.to.Sub(mw.from) && m.Cause == event.StallFrontEndBlock {
			t.Errorf("a pause prefill steps fill is labelled %s: %s", m.Cause, m.Message)
		}
	}
	t.Logf("%d loop blocks: %d inside a prefill step, %d before any stream decoded or unseen, %d seen, %d of them named front-end blocks (%s); stall causes %v\n%s",
		len(run.blocks), hidden, unseen, judged, found, strings.Join(report, "; "), run.res.causes(), messages(stalls))
	if 5*found < 4*judged {
		t.Errorf("%d of %d loop blocks the probe could see named front-end blocks, want at least 80%%", found, judged)
	}
	if run.res.causes()[event.StallPrefillInterference] == 0 {
		t.Errorf("no prefill interference on a load whose every admission prefills 30K tokens in 8,192-token steps among decoding streams")
	}
}

// TestStallCausesLongPromptsDefaultProfileWithPool: the same load with a
// tokenizer pool: the truth lists no loop block, and no pause is called a
// front-end block but where the host held the whole process up.
func TestStallCausesLongPromptsDefaultProfileWithPool(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("timing on the calibrated profile: not under -short or -race")
	}
	run := longPromptScenario(t, 4)
	if len(run.blocks) > 0 {
		t.Errorf("the truth lists %d loop blocks with a tokenizer pool", len(run.blocks))
	}
	for _, m := range run.res.stalls() {
		if m.Cause == event.StallFrontEndBlock && !run.watch.during(markerWindow(m)) {
			t.Errorf("with a tokenizer pool, a pause called a front-end block: %s", m.Message)
		}
	}
	t.Logf("stall causes %v", run.res.causes())
}
