//go:build acceptance

package probe_test

import (
	"slices"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/sim"
)

// Acceptance tier: the probe's reasoning figures against the simulator's
// own flush times, in real time. The premise is a host that keeps pace:
// a frame read more than a millisecond after its flush fails the test.

// deliveryErrors appends, for each of r's chunks, how far the probe's
// arrival time is from the simulator's flush of that frame.
func deliveryErrors(t *testing.T, errs []time.Duration, r *event.Request, flushes []time.Time) []time.Duration {
	t.Helper()
	if len(flushes) != len(r.Chunks) {
		t.Fatalf("%s: %d chunks, %d frames flushed", r.ID, len(r.Chunks), len(flushes))
	}
	for i, c := range r.Chunks {
		errs = append(errs, r.Start.Add(c.At).Sub(flushes[i]).Abs())
	}
	return errs
}

// The time to the first answer token is the first token plus the thinking
// the simulator streamed: TTFT + the N reasoning frames' gaps (N × ITL),
// within 1 ms, for both chat field names and the Responses API; and the
// Responses dialect's TTFT and ITL are as true as the chat dialect's.
func TestReasoningAnswerAgainstSimTruth(t *testing.T) {
	const n, out = 20, 25
	errs := map[string][]time.Duration{}
	for _, tc := range []struct{ dialect, field string }{
		{probe.DialectOpenAIChat, sim.ReasoningField},
		{probe.DialectOpenAIChat, sim.ReasoningContentField},
		{probe.DialectOpenAIResponses, ""},
	} {
		url, log := reasoningSim(t, n, tc.field)
		for _, r := range sendSequential(t, url, tc.dialect, 5, out) {
			if !r.OK() {
				t.Fatalf("%s: outcome %s: %s", tc.dialect, r.Outcome, r.Error)
			}
			flushes := log.of(r.ID)
			truth := flushes[n].Sub(flushes[0]) // the thinking the server streamed
			if d := (r.Thinking() - truth).Abs(); d > time.Millisecond {
				t.Errorf("%s %s: answer at TTFT + %v, the server's N reasoning frames took %v (off by %v > 1 ms)",
					tc.dialect, tc.field, r.Thinking(), truth, d)
			}
			errs[tc.dialect] = deliveryErrors(t, errs[tc.dialect], r, flushes)
		}
	}
	// TTFT and ITL are as true as the arrival times: the median chunk
	// must arrive within 1 ms of its flush in each dialect.
	for dialect, e := range errs {
		slices.Sort(e)
		med, worst := e[len(e)/2], e[len(e)-1]
		t.Logf("%s: chunks arrived a median %v (worst %v) after their flush", dialect, med, worst)
		if med > time.Millisecond {
			t.Errorf("%s: the median chunk arrived %v after its flush (> 1 ms): the host did not keep pace, or the dialect times chunks wrong", dialect, med)
		}
	}
}
