package sweepjudge

import (
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// TestMeterFailsAStepWithoutASuccess: a step fails (Failed, naming the top
// error) when no request succeeded in its measured part; past capacity a
// step whose measured requests were all cut off still saw older ones
// complete in it, so it is judged on its load, not failed.
func TestMeterFailsAStepWithoutASuccess(t *testing.T) {
	set, err := Rules{Warmup: time.Second, Window: 2 * time.Second, StepMax: 10 * time.Second}.Fill()
	if err != nil {
		t.Fatal(err)
	}
	req := func(sent, took time.Duration, outcome event.Outcome) event.Event {
		r := &event.Request{Intended: t0.Add(sent), Start: t0.Add(sent), E2E: took, Outcome: outcome}
		switch outcome {
		case event.OutcomeOK:
			r.TTFT, r.OutputTokens = took/2, 4
		case event.OutcomeHTTPStatus:
			r.Status, r.Error = 429, "http 429: rate limited"
		}
		return event.NewRequest(r)
	}
	step := func(events ...event.Event) Step {
		m := newMeter(&set, nil, StepSpec{Index: 1, Load: Load{OpenLoop, 10}}, t0)
		for _, ev := range events {
			m.add(ev)
		}
		m.ended(t0.Add(4*time.Second), int64(len(events)), "decided", false)
		m.finish()
		s, _ := m.result()
		return s
	}

	var rejected []event.Event
	for i := range 30 {
		rejected = append(rejected, req(time.Duration(i)*100*time.Millisecond, time.Millisecond, event.OutcomeHTTPStatus))
	}
	s := step(rejected...)
	if s.Failed != "no request succeeded: http 429: rate limited" || s.Pass || s.Verdict() != "no success" {
		t.Errorf("all 429: failed %q, pass %v, verdict %q; want it failed, naming the 429", s.Failed, s.Pass, s.Verdict())
	}

	// A warm-up request completes in the measured part; every measured
	// request is cut off.
	var past []event.Event
	for i := range 20 {
		past = append(past, req(time.Second+time.Duration(i)*100*time.Millisecond, 0, event.OutcomeCancelled))
	}
	if s := step(append(past, req(100*time.Millisecond, 1500*time.Millisecond, event.OutcomeOK))...); s.Failed != "" || s.TTFT.Count != 0 {
		t.Errorf("past capacity: failed %q, TTFT %+v; want it judged on its load, with no measured TTFT", s.Failed, s.TTFT)
	}

	// The server died in the warm-up: its successes end before the
	// measured part, whose requests all fail.
	died := append([]event.Event{req(100*time.Millisecond, 100*time.Millisecond, event.OutcomeOK)}, rejected[10:]...)
	if s := step(died...); s.Failed != "no request succeeded after the warm-up: http 429: rate limited" {
		t.Errorf("died in the warm-up: failed %q, want it failed after the warm-up", s.Failed)
	}

	if s := step(req(2*time.Second, 0, event.OutcomeCancelled)); !strings.Contains(s.Failed, "1 still in flight when the step ended") {
		t.Errorf("nothing finished: failed %q, want it to say the request was still in flight", s.Failed)
	}
}
