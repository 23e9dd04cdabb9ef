package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
)

// The fleet merges the agents' distributions exactly: its request count
// is the sum of theirs and its TTFT p50 is that of the union of their
// requests, which here is far from the mean of their p50s.
func TestFleetMergesTheAgentsExactly(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	agents := []struct {
		name string
		n    int
		ttft time.Duration // the agent's requests take ttft, ttft+1ms, ...
	}{{"east", 50, 100 * time.Millisecond}, {"west", 200, 400 * time.Millisecond}, {"north", 20, 900 * time.Millisecond}}
	f := newFleet(len(agents))
	union := aggregate.New(aggregate.Config{})
	union.Add(event.NewSession(&event.Session{Time: start, Latscope: "test", Name: "union"}))
	var perAgentP50 float64
	for _, a := range agents {
		fan := pipeline.NewFanout()
		wait := f.tap().start(context.Background(), fan)
		own := aggregate.New(aggregate.Config{})
		session := event.NewSession(&event.Session{Time: start, Latscope: "test", Name: a.name, Target: "http://" + a.name})
		fan.Publish(session)
		own.Add(session)
		for i := range a.n {
			at := start.Add(time.Duration(i) * 100 * time.Millisecond)
			ttft := a.ttft + time.Duration(i)*time.Millisecond
			r := event.NewRequest(&event.Request{ID: fmt.Sprintf("%s-%d", a.name, i), Intended: at, Start: at, Outcome: event.OutcomeOK,
				TTFT: ttft, E2E: ttft + 10*time.Millisecond, OutputTokens: 1})
			fan.Publish(r)
			own.Add(r)
			union.Add(r)
		}
		fan.Close()
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		perAgentP50 += own.Snapshot(start.Add(time.Minute)).Windows[aggregate.WinRun].TTFT.P50 / float64(len(agents))
	}
	fr, _ := f.frame()
	got := fr.Snapshot.Windows[aggregate.WinRun]
	want := union.Snapshot(fr.Snapshot.Now).Windows[aggregate.WinRun]
	if got.TTFT.Count != 270 || got.Sent != 270 {
		t.Fatalf("the fleet counts %d requests (%d sent), want the agents' 270", got.TTFT.Count, got.Sent)
	}
	if got.TTFT.P50 != want.TTFT.P50 || got.TTFT.P99 != want.TTFT.P99 {
		t.Fatalf("fleet TTFT p50/p99 %.1f/%.1f ms, the union's %.1f/%.1f ms", got.TTFT.P50, got.TTFT.P99, want.TTFT.P50, want.TTFT.P99)
	}
	// The union's median is a west request (over 400 ms), while the mean
	// of the agents' medians is about 480 ms: not what the fleet shows.
	if got.TTFT.P50 < 400 || got.TTFT.P50 > 600 || got.TTFT.P50 == perAgentP50 {
		t.Fatalf("fleet p50 %.1f ms (mean of the agents' p50s %.1f)", got.TTFT.P50, perAgentP50)
	}
	if h := fr.Snapshot.Session; h == nil || h.Name != "fleet" {
		t.Fatalf("fleet session %+v", h)
	}
}
