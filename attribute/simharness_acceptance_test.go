//go:build acceptance

package attribute

import (
	"context"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/sim"
)

// The simulator harness's parts that only the acceptance tests use.

func (ts *truths) get(id string) (sim.Truth, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	tr, ok := ts.by[id]
	return tr, ok
}

// runThrough sends a Runner's load through the attributor and returns the
// records that came out, the last probe sample and the run's stats.
func runThrough(t *testing.T, client *probe.Client, load probe.LoadConfig, attributor *Attributor) ([]*event.Request, *event.ProbeSample, probe.RunStats) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prompts, err := probe.NewPromptSource(ctx, probe.PromptConfig{
		PromptTokens: probe.Length{Mean: 32}, OutputTokens: probe.Length{Mean: 24}, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	runner, err := probe.NewRunner(client, load, prompts)
	if err != nil {
		t.Fatal(err)
	}
	reqs, last := runPipeline(ctx, t, pipeline.Config{Primary: []pipeline.Source{runner}, Stage: attributor})
	return reqs, last, runner.Stats()
}
