//go:build acceptance

package aggregate_test

// Acceptance tier: results by prompt length against the real-time
// simulator, whose prefill grows with the prompt.

import (
	"testing"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/sim"
)

// Prompts drawn from 512:256 land in several length buckets, and the
// longest bucket's TTFT p99 is above the shortest's: the tail of long
// prompts is seen apart from the short ones.
func TestByPromptLengthWithTheSimulator(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("timing on the calibrated profile: not under -short or -race")
	}
	url := startSim(t, sim.Config{Profile: h100(t), Seed: 1})
	p, err := probe.NewPromptSource(t.Context(), probe.PromptConfig{
		PromptTokens: probe.Length{Mean: 512, StdDev: 256}, OutputTokens: probe.Length{Mean: 16}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	res := runLoad(t, simClient(t, url, nil), probe.LoadConfig{Concurrency: 1, Requests: 80}, p, nil)
	a := aggregate.New(aggregate.Config{})
	for _, r := range res.recs {
		a.Add(event.Event{Request: r})
	}
	s := a.Summary()
	if s.ByLength == nil || len(s.ByLength.Prompt) < 3 {
		t.Fatalf("by prompt length = %+v, want three buckets or more", s.ByLength)
	}
	b := s.ByLength.Prompt
	short, long := b[0], b[len(b)-1]
	// The end buckets hold few requests; take the fullest of each half.
	for _, k := range b[:len(b)/2] {
		if k.Count > short.Count {
			short = k
		}
	}
	for _, k := range b[len(b)/2:] {
		if k.Count > long.Count {
			long = k
		}
	}
	t.Logf("prompt %s: %d requests, ttft p99 %.2f ms; prompt %s: %d, %.2f ms", short.Label(), short.Count, short.TTFT.P99, long.Label(), long.Count, long.TTFT.P99)
	if long.TTFT.P99 <= short.TTFT.P99 {
		t.Errorf("ttft p99 of prompts %s (%.2f ms) not above that of prompts %s (%.2f ms)", long.Label(), long.TTFT.P99, short.Label(), short.TTFT.P99)
	}
}
