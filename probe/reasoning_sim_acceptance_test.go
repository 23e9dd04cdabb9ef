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

// of is the flush times of request id's content frames.
func (l *frameLog) of(id string) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.frames[id]
}

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
// within the two frames' own delivery errors for every one of nine requests, for both chat field names
// and the Responses API; and the
// Responses dialect's TTFT and ITL are as true as the chat dialect's.
// deliveryBound is how late the median chunk may reach the probe after
// the in-process simulator flushed it on a two-core host.
const deliveryBound = 2 * time.Millisecond

// answerSlack is how far the thinking may be from the server's, beyond
// the two frames' delivery: clock reading, far below one gap between
// frames (about 1.2 ms here), which a wrong answer frame would be off by.
const answerSlack = 200 * time.Microsecond

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
			// The thinking is the difference of two arrivals, the first
			// frame's and the first answer's, each late by its own
			// delivery: beyond those two the error is the probe's (a
			// wrong frame taken for the answer is a whole gap off).
			var late time.Duration
			if len(r.Chunks) == len(flushes) {
				late = r.Start.Add(r.Chunks[0].At).Sub(flushes[0]).Abs() + r.Start.Add(r.Chunks[n].At).Sub(flushes[n]).Abs()
			}
			offs = append(offs, max((r.Thinking()-truth).Abs()-late, 0))
			t.Logf("%s %s: answer at TTFT + %v, the server's N reasoning frames took %v", tc.dialect, tc.field, r.Thinking(), truth)
			errs[tc.dialect] = deliveryErrors(t, errs[tc.dialect], r, flushes)
		}
		slices.Sort(offs)
		if worst := offs[len(offs)-1]; worst > answerSlack {
			t.Errorf("%s %s: a request's thinking is off by %v from the server's N reasoning frames beyond the two frames' own delivery (> %v)", tc.dialect, tc.field, worst, answerSlack)
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
