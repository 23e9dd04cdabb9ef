package session

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
)

// The dashboard's fleet view and attach's summary read one merger: the
// view's whole-run TTFT is the summary's, and its requests sample holds
// the agents' requests on the fleet's timeline (an agent 250 ms ahead has
// its requests moved back by that).
func TestFleetViewIsTheSummarysFleet(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	v := newFleetView()
	for _, a := range []struct {
		name string
		skew time.Duration
		ttft time.Duration
	}{{"ahead", 250 * time.Millisecond, 300 * time.Millisecond}, {"exact", 0, 100 * time.Millisecond}} {
		src := pipeline.SourceFunc(func(_ context.Context, emit func(event.Event)) error {
			at := start.Add(a.skew)
			emit(event.NewSession(&event.Session{Time: at, Latscope: "test", Name: a.name, Load: event.Load{Mode: "closed", Concurrency: 1}}))
			for i := range 30 {
				s := at.Add(time.Duration(i) * time.Second)
				d := a.ttft + time.Duration(i)*time.Millisecond
				emit(event.NewRequest(&event.Request{ID: fmt.Sprintf("%s-%d", a.name, i), Intended: s, Start: s,
					Outcome: event.OutcomeOK, TTFT: d, E2E: d + 5*time.Millisecond, OutputTokens: 1}))
			}
			return nil
		})
		if err := v.merged.Source(src, func() time.Duration { return a.skew }).Run(t.Context(), func(event.Event) {}); err != nil {
			t.Fatal(err)
		}
	}
	fr, _ := v.frame()
	run, sum := fr.Snapshot.Windows[aggregate.WinRun], v.merged.Summary()
	if run.TTFT.Count != 60 || run.TTFT.P50 != sum.TTFT.P50 || run.TTFT.P99 != sum.TTFT.P99 || run.Sent != sum.Requests.Sent {
		t.Fatalf("the fleet view says %d requests, TTFT p50/p99 %.3f/%.3f; the summary %d, %.3f/%.3f",
			run.TTFT.Count, run.TTFT.P50, run.TTFT.P99, sum.Requests.Sent, sum.TTFT.P50, sum.TTFT.P99)
	}
	if len(fr.Snapshot.Sample.Latest) == 0 {
		t.Fatal("the fleet view's requests sample is empty")
	}
	for _, r := range fr.Snapshot.Sample.Latest {
		var name string
		var i int
		if _, err := fmt.Sscanf(r.ID, "%5s-%d", &name, &i); err != nil {
			t.Fatal(err)
		}
		if want := start.Add(time.Duration(i) * time.Second); !r.Start.Equal(want) {
			t.Errorf("request %s starts at %v on the fleet's timeline, want %v", r.ID, r.Start.Sub(start), want.Sub(start))
		}
	}
}
