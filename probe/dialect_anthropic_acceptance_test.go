//go:build acceptance

package probe_test

import (
	"slices"
	"testing"
	"time"

	"github.com/latscope/latscope/probe"
)

// The acceptance criterion of the Messages dialect: against the simulator,
// with thinking, the time to the first answer token is TTFT + thinking, as
// for the OpenAI reasoning fields (TestReasoningAnswerAgainstSimTruth): the
// thinking the probe measures is the simulator's N thinking frames' span,
// within the two frames' own delivery and answerSlack, for each of nine
// requests; and the chunks arrive within deliveryBound of their flush.
func TestAnthropicThinkingAgainstSimTruth(t *testing.T) {
	const n, out = 20, 25
	url, log := reasoningSim(t, n, "")
	var offs, errs []time.Duration
	for _, r := range sendSequential(t, url, probe.DialectAnthropicMessages, 9, out) {
		if !r.OK() {
			t.Fatalf("outcome %s: %s", r.Outcome, r.Error)
		}
		flushes := log.of(r.ID)
		errs = deliveryErrors(t, errs, r, flushes)
		truth := flushes[n].Sub(flushes[0])
		late := r.Start.Add(r.Chunks[0].At).Sub(flushes[0]).Abs() + r.Start.Add(r.Chunks[n].At).Sub(flushes[n]).Abs()
		offs = append(offs, max((r.Thinking()-truth).Abs()-late, 0))
		if r.TTFTAnswer != r.TTFT+r.Thinking() {
			t.Errorf("%s: answer %v is not TTFT %v + thinking %v", r.ID, r.TTFTAnswer, r.TTFT, r.Thinking())
		}
		t.Logf("%s: answer at TTFT + %v, the server's N thinking frames took %v", r.ID, r.Thinking(), truth)
	}
	slices.Sort(offs)
	if worst := offs[len(offs)-1]; worst > answerSlack {
		t.Errorf("a request's thinking is off by %v from the server's N thinking frames beyond the two frames' own delivery (> %v)", worst, answerSlack)
	}
	slices.Sort(errs)
	if med := errs[len(errs)/2]; med > deliveryBound {
		t.Errorf("the median chunk arrived %v after its flush (> %v): the host did not keep pace, or the dialect times chunks wrong", med, deliveryBound)
	}
}
