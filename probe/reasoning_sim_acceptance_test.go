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
// within two deliveries' error for the median of nine requests, for both chat field names
// and the Responses API; and the
// Responses dialect's TTFT and ITL are as true as the chat dialect's.
// deliveryBound is how late the median chunk may reach the probe after
// the in-process simulator flushed it on a two-core host.
const deliveryBound = 2 * time.Millisecond

func TestReasoningAnswerAgainstSimTruth(t *testing.T) {
	const n, out = 20, 25
	errs := map[string][]time.Duration{}
	for _, tc := range []struct{ dialect, field string }{
		{probe.DialectOpenAIChat, sim.ReasoningField},
		{probe.DialectOpenAIChat, sim.ReasoningContentField},
		{probe.DialectOpenAIResponses, ""},
	} {
		url, log := reasoningSim(t, n, tc.field)
		var offs []time.Duration
		for _, r := range sendSequential(t, url, tc.dialect, 9, out) {
			if !r.OK() {
				t.Fatalf("%s: outcome %s: %s", tc.dialect, r.Outcome, r.Error)
			}
			flushes := log.of(r.ID)
			truth := flushes[n].Sub(flushes[0]) // the thinking the server streamed
			offs = append(offs, (r.Thinking() - truth).Abs())
			t.Logf("%s %s: answer at TTFT + %v, the server's N reasoning frames took %v", tc.dialect, tc.field, r.Thinking(), truth)
			errs[tc.dialect] = deliveryErrors(t, errs[tc.dialect], r, flushes)
		}
		// The thinking is the difference of two arrivals, each late by
		// up to a delivery's error (below, a millisecond or so with the
		// simulator's spinning steps on the same two cores, a few ms at
		// worst): the typical request must be within two of them.
		slices.Sort(offs)
		if med := offs[len(offs)/2]; med > deliveryBound*2 {
			t.Errorf("%s %s: the median request's thinking is off by %v from the server's N reasoning frames (> %v)", tc.dialect, tc.field, med, 2*deliveryBound)
		}
	}
	// TTFT and ITL are as true as the arrival times: the median chunk
	// must arrive within deliveryBound of its flush in each dialect.
	for dialect, e := range errs {
		slices.Sort(e)
		med, worst := e[len(e)/2], e[len(e)-1]
		t.Logf("%s: chunks arrived a median %v (worst %v) after their flush", dialect, med, worst)
		if med > deliveryBound {
			t.Errorf("%s: the median chunk arrived %v after its flush (> %v): the host did not keep pace, or the dialect times chunks wrong", dialect, med, deliveryBound)
		}
	}
}
