package attribute

// The harness of the tests that run the probe, the attributor and the
// simulator together (sim_acceptance_test.go, queue_evidence_test.go).

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/sim"
	"github.com/latscope/latscope/sim/simtest"
)

// promTestTimeout is the scrape timeout of the tests that scrape the
// simulator's metrics: far above their short intervals, so a busy machine
// cannot fail a scrape.
const promTestTimeout = 5 * time.Second

// serveSim runs a simulator with the tiny profile and cfg's modes on a
// loopback port until the test ends, and returns its URL.
func serveSim(t *testing.T, cfg sim.Config) string {
	t.Helper()
	return simtest.ServeTiny(t, cfg)
}

// truths collects the simulator's truth of every request, by request id.
type truths struct {
	mu sync.Mutex
	by map[string]sim.Truth
}

func (ts *truths) add(tr sim.Truth) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.by == nil {
		ts.by = map[string]sim.Truth{}
	}
	ts.by[tr.RequestID] = tr
}

// runPipeline runs cfg to its end with one lossless consumer and returns
// the request records in the order they came out, and the last probe
// sample.
func runPipeline(ctx context.Context, t *testing.T, cfg pipeline.Config) ([]*event.Request, *event.ProbeSample) {
	t.Helper()
	fan := pipeline.NewFanout()
	sub := fan.Subscribe("test", 64, pipeline.Lossless)
	type result struct {
		reqs  []*event.Request
		probe *event.ProbeSample
	}
	collected := make(chan result)
	go func() {
		var res result
		for ev := range sub.Events() {
			switch {
			case ev.Request != nil:
				res.reqs = append(res.reqs, ev.Request)
			case ev.Probe != nil:
				res.probe = ev.Probe
			}
		}
		collected <- res
	}()
	if _, err := pipeline.Run(ctx, cfg, fan); err != nil {
		t.Fatal(err)
	}
	res := <-collected
	return res.reqs, res.probe
}
