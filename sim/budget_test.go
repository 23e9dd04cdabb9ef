package sim

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// gaugeValue reads g as a scrape would.
func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// TestBudgetWaitIsQueued: a prompt that finds a free slot but no token
// budget left waits in the scheduler's queue, as in vLLM (its scheduler
// admits from the waiting queue only while budget is left): the waiting
// gauge counts it and its queue runs from being queued to the step that
// admits it. With h100-7b's budget (vLLM's H100 default, 8192 tokens)
// sixteen 512-token prompts that arrive together are all admitted at once.
func TestBudgetWaitIsQueued(t *testing.T) {
	t.Parallel()
	prof, err := ProfileByName("h100-7b")
	if err != nil {
		t.Fatal(err)
	}
	if prof.MaxBatchedTokens != 8192 {
		t.Errorf("h100-7b's step budget %d, want vLLM's H100 default of 8192", prof.MaxBatchedTokens)
	}
	for _, tc := range []struct {
		budget, admitted int
	}{{512, 1}, {8192, 16}} {
		prof.MaxBatchedTokens = tc.budget
		e := newEngine(prof, newMetrics(DefaultModel), func(tokenEvent) {})
		var reqs []*request
		for range 16 {
			r := &request{promptTokens: 512, target: 4}
			reqs = append(reqs, r)
			e.inbox = append(e.inbox, &seq{req: r})
		}
		t0 := time.Unix(1_700_000_000, 0)
		e.mu.Lock()
		p, _ := e.plan(t0)
		waiting := len(e.waiting)
		e.mu.Unlock()
		if p == nil {
			t.Fatalf("budget %d: no step planned", tc.budget)
		}
		if len(p.admitted) != tc.admitted || waiting != 16-tc.admitted {
			t.Fatalf("budget %d: %d admitted, %d waiting; want %d admitted", tc.budget, len(p.admitted), waiting, tc.admitted)
		}
		if got := gaugeValue(t, e.m.waiting); got != float64(16-tc.admitted) {
			t.Errorf("budget %d: the waiting gauge shows %v, want %d", tc.budget, got, 16-tc.admitted)
		}
		if tc.admitted == 16 {
			continue
		}
		// The next step, when the first prompt's step has ended, admits the
		// second: it was queued the whole first step.
		t1 := t0.Add(prof.stepCost(512, 0))
		e.mu.Lock()
		e.apply(p, t1)
		p2, _ := e.plan(t1)
		e.mu.Unlock()
		second := reqs[1].eng
		if p2 == nil || !second.queued.Equal(t0) || !second.scheduled.Equal(t1) {
			t.Errorf("budget %d: the second prompt queued at %v and scheduled at %v, want %v and %v", tc.budget, second.queued, second.scheduled, t0, t1)
		}
	}
}
