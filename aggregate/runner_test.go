package aggregate_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
)

// stallTimelineDoer answers every request with a record on a fixed
// synthetic timeline: request seq starts seq ms after base, and sends a
// chunk every 5 ms except for a 100 ms pause at base+500ms, the same
// instant for all. The records do not depend on when the test runs.
type stallTimelineDoer struct{ base time.Time }

func (d stallTimelineDoer) Do(_ context.Context, spec probe.RequestSpec) *event.Request {
	start := d.base.Add(time.Duration(spec.Seq) * time.Millisecond)
	pauseAt := d.base.Add(500 * time.Millisecond)
	rec := &event.Request{ID: spec.ID, Seq: spec.Seq, Start: start, Intended: start, Outcome: event.OutcomeOK, OutputTokens: 300}
	at := start
	for range 300 {
		rec.Chunks = append(rec.Chunks, event.Chunk{At: at.Sub(start), Tokens: 1})
		at = at.Add(5 * time.Millisecond)
		if !at.Before(pauseAt) && at.Before(pauseAt.Add(5*time.Millisecond)) {
			at = at.Add(100 * time.Millisecond)
		}
	}
	rec.E2E = at.Sub(start)
	return rec
}

// Six streams whose chunks pause together for 100 ms at the same absolute
// time: the aggregator, fed what the real Runner emits, reports it once.
// On a virtual clock, so the records' timeline and the probe's samples
// share one clock whenever the test runs.
func TestRunnerStallsThroughTheAggregator(t *testing.T) {
	synctest.Test(t, runnerStalls)
}

func runnerStalls(t *testing.T) {
	prompts, err := probe.NewPromptSource(t.Context(), probe.PromptConfig{PromptTokens: probe.Length{Mean: 64}, OutputTokens: probe.Length{Mean: 8}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	r, err := probe.NewRunner(stallTimelineDoer{base: time.Now()}, probe.LoadConfig{Concurrency: 6, Requests: 6}, prompts)
	if err != nil {
		t.Fatal(err)
	}
	agg := aggregate.New(aggregate.Config{})
	if err := r.Run(t.Context(), agg.Add); err != nil { // Run's calls to emit are serialised
		t.Fatal(err)
	}
	s := agg.Final()
	var stalls []event.Marker
	for _, m := range s.Markers.Recent {
		if m.Kind == event.MarkerStall {
			stalls = append(stalls, m)
		}
	}
	if st := r.Stats(); st.Sent != 6 || st.OK != 6 {
		t.Fatalf("stats %+v: want 6 ok", st)
	}
	if len(stalls) != 1 || s.Markers.Counts[event.MarkerStall] != 1 || stalls[0].Values["streams"] != 6 {
		t.Fatalf("got %d stall markers %+v, want one of 6 streams", len(stalls), stalls)
	}
}
