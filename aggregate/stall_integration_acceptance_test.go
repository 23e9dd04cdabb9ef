//go:build acceptance

package aggregate_test

// Acceptance tier (go test -tags acceptance -p 1): the stall detector
// against the simulator's blocked event loop in real time. Whether the
// probe can see a 100 ms pause depends on the host reading frames on time,
// so these are not in the default suite; see CONTRIBUTING.md.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// TestStallDetectorSeesBlockedTokenizer: with tokenization on the server's
// event loop, one 8K-token prompt holds every stream's frames for about
// 100 ms, and the detector reports the streams paused together.
//
// What is certain, and asserted: the server flushed no frame of any stream
// while it tokenized (its flush times show the pause), and the probe's gap
// across it is at least that pause less how late the probe read the frame
// before it (measured: arrival minus flush). When that lower bound is over
// the detector's threshold for enough streams, the detector must report
// the stall. When a starved machine made the probe read so late that the
// bound is under the threshold, the pause may honestly not show; the test
// then fails, saying so: this tier's premise is a host that keeps pace.
func TestStallDetectorSeesBlockedTokenizer(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("timing on the calibrated profile: not under -short or -race")
	}
	run := stallScenario(t, 0)
	if tok := time.Duration(run.truths[run.longID].TokenizeUs) * time.Microsecond; tok < 80*time.Millisecond {
		t.Fatalf("the long prompt took %v to tokenize, want about 100 ms: the profile no longer blocks the loop", tok)
	}
	visible := 0
	var report []string
	for _, r := range run.recs {
		fl := run.flushes[r.ID]
		k := 0 // the frame before the server's longest pause: the tokenization
		for j := 1; j+1 < len(fl); j++ {
			if fl[j+1].Sub(fl[j]) > fl[k+1].Sub(fl[k]) {
				k = j
			}
		}
		pause := fl[k+1].Sub(fl[k])
		late := max(at(r, k).Sub(fl[k]), 0)
		threshold := max(stallFactor*medianGap(r), stallMinGap)
		if pause-late > threshold {
			visible++
		}
		report = append(report, fmt.Sprintf("%s: server pause %v, probe read %v late, threshold %v", r.ID,
			pause.Round(time.Millisecond), late.Round(time.Millisecond), threshold.Round(time.Millisecond)))
	}
	if visible < stallMinStreams {
		// The acceptance tier runs alone (-p 1) on a machine that keeps pace:
		// a probe reading this late is a failure to report, not to hide.
		t.Fatalf("the probe read too late to be sure of seeing the pause in %d streams (the acceptance tier needs a host that keeps pace with the simulator): %s", stallMinStreams, strings.Join(report, "; "))
	}
	// The marker of the tokenization's pause: the one over the long
	// prompt's stay in the front end (on a busy machine other shared
	// pauses, the engine's or the host's, may come first).
	tr := run.truths[run.longID]
	arrived := time.UnixMicro(tr.ArrivalUnixUs)
	tokenizing := window{arrived, arrived.Add(time.Duration(tr.HTTPUs+tr.LoopWaitUs+tr.TokenizeUs) * time.Microsecond)}
	// When the host also held this process (probe and simulator alike) up
	// during the tokenization, the probe's scheduling-lag watch may rightly
	// name the pause the probe's, and a pause without its burst of held
	// tokens is rightly unexplained ("the engine itself paused, or the
	// server's host was starved": it was). Prefill interference is wrong
	// either way, and on a host that kept pace only the front end is right.
	held := run.watch.during(tokenizing)
	// Of the markers over it, the one that covers most of it: a short
	// pause of the host's inside the same window is not the tokenizer's.
	var best *event.Marker
	for i := range run.markers {
		m := &run.markers[i]
		if len(m.RequestIDs) >= stallMinStreams && markerWindow(*m).overlap(tokenizing) > 0 &&
			(best == nil || markerWindow(*m).overlap(tokenizing) > markerWindow(*best).overlap(tokenizing)) {
			best = m
		}
	}
	if m := best; m != nil {
		t.Logf("blocking tokenizer (host held the process up meanwhile: %v): %s", held, m.Message)
		if m.Cause != event.StallFrontEndBlock && !(held && (m.Cause == event.StallProbeStarved || m.Cause == event.StallUnexplained)) {
			t.Errorf("the blocked loop's pause labelled %s (host held the process up meanwhile: %v; this tier needs a host that keeps pace): %s", m.Cause, held, m.Message)
		}
		return
	}
	t.Fatalf("no stall marker of %d streams (markers %v), though the pause was visible in %d: %s",
		stallMinStreams, run.markers, visible, strings.Join(report, "; "))
}

// TestStallDetectorQuietWithTokenizerPool: with the tokenizer in a pool the
// event loop never holds the streams' frames, so the detector must not
// report a pause the loop caused.
//
// It may still report a real shared pause from elsewhere, and the test
// allows that: the engine's own steps (its ground truth gives the gap
// between the same two tokens: the long prompt's prefill in chunks), or
// the probe reading late on a starved machine (the server's flush times
// show no pause). Such a marker must not name the front end. A marker
// counts as the loop's when, for enough of its streams, the server held
// the frames (flush gap minus engine gap) for more than half the gap the
// probe saw.
func TestStallDetectorQuietWithTokenizerPool(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("timing on the calibrated profile: not under -short or -race")
	}
	run := stallScenario(t, 2)
	byID := map[string]*event.Request{}
	for _, r := range run.recs {
		byID[r.ID] = r
	}
	for _, m := range run.markers {
		if run.watch.during(markerWindow(m)) {
			t.Logf("the host held this process up around: %s", m.Message)
			continue
		}
		loop := 0
		var report []string
		for _, id := range m.RequestIDs {
			r, fl, tr := byID[id], run.flushes[id], run.truths[id]
			j := 0 // the chunk before the pause
			for j+2 < len(r.Chunks) && !at(r, j+1).After(m.Time) {
				j++
			}
			seen := at(r, j+1).Sub(at(r, j))
			held := fl[j+1].Sub(fl[j])
			var engine time.Duration
			if j < len(tr.DecodeGapsUs) {
				engine = time.Duration(tr.DecodeGapsUs[j]) * time.Microsecond
			}
			if held-engine > seen/2 {
				loop++
			}
			report = append(report, fmt.Sprintf("%s: probe gap %v, server flush gap %v, engine gap %v", id,
				seen.Round(time.Millisecond), held.Round(time.Millisecond), engine.Round(time.Millisecond)))
		}
		if loop >= stallMinStreams {
			t.Errorf("with the tokenizer off the event loop, the loop held %d streams together: %s (%s)", loop, m.Message, strings.Join(report, "; "))
			continue
		}
		if m.Cause == event.StallFrontEndBlock {
			t.Errorf("with the tokenizer off the event loop, a pause is labelled a front-end block: %s (%s)", m.Message, strings.Join(report, "; "))
		}
		t.Logf("a shared pause the engine or the probe explains: %s (%s)", m.Message, strings.Join(report, "; "))
	}
}
