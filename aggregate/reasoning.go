package aggregate

import (
	"fmt"
	"time"

	"github.com/latscope/latscope/event"
)

// A reasoning model streams its thinking before its answer, so its first
// token is not what its user waits for. The aggregator keeps both: TTFT
// (the first token of any kind) and TTFTAnswer (the first answer token),
// the thinking stage between them, the time to the second token, and the
// reasoning and answer token counts. The TTFT basis says which of the two
// the TTFT bar, the goodput and --slo's ttft objectives use.

// TTFTBasis says which first token the TTFT bar, the goodput and --slo's
// ttft objectives measure to.
type TTFTBasis string

// The TTFT bases.
const (
	// BasisAnswer is the first answer token: after the thinking when a
	// model reasons, the first token otherwise. The default.
	BasisAnswer TTFTBasis = "answer"
	// BasisFirst is the first token of any kind, reasoning included.
	BasisFirst TTFTBasis = "first"
)

// ParseTTFTBasis parses a basis by name; "" is BasisAnswer.
func ParseTTFTBasis(name string) (TTFTBasis, error) {
	switch TTFTBasis(name) {
	case "", BasisAnswer:
		return BasisAnswer, nil
	case BasisFirst:
		return BasisFirst, nil
	}
	return "", fmt.Errorf("unknown TTFT basis %q (known: %s, %s)", name, BasisAnswer, BasisFirst)
}

// ttftOf is r's TTFT on basis b; ok is false when the request has none on
// it (a reasoning model that never answered has no answer TTFT).
func ttftOf(b TTFTBasis, r *event.Request) (d time.Duration, ok bool) {
	if b == BasisFirst {
		return r.TTFT, r.TTFT > 0
	}
	d = r.AnswerTTFT()
	return d, d > 0
}

// Reasoning counts what the reasoning models of a run did. It is absent
// (nil) from a summary when no request reasoned.
type Reasoning struct {
	// Requests counts the successful requests that streamed reasoning;
	// Unanswered those of them that ended before an answer token.
	Requests   int64 `json:"requests"`
	Unanswered int64 `json:"unanswered"`
	// ReasoningTokens and AnswerTokens split those requests' output tokens.
	ReasoningTokens int64 `json:"reasoning_tokens"`
	AnswerTokens    int64 `json:"answer_tokens"`
}

// reasoningState is the aggregator's part for reasoning models.
type reasoningState struct {
	ttftAnswer, thinking, ttst *metric
	counts                     Reasoning
}

func newReasoningState() reasoningState {
	return reasoningState{ttftAnswer: newMetric(), thinking: newMetric(), ttst: newMetric()}
}

func (s *reasoningState) metrics() []*metric { return []*metric{s.ttftAnswer, s.thinking, s.ttst} }

// recordReasoning records a successful request's answer TTFT, thinking
// stage, time to second token and token split.
func (a *Aggregator) recordReasoning(r *event.Request, end time.Time) {
	s := &a.reasoning
	if d := r.AnswerTTFT(); d > 0 {
		a.recordDur(s.ttftAnswer, end, d)
	}
	if d := r.TTST(); d > 0 {
		a.recordDur(s.ttst, end, d)
	}
	if !r.Reasoned() {
		return
	}
	a.reasoned = true
	c := &s.counts
	c.Requests++
	c.ReasoningTokens += int64(r.ReasoningTokens)
	c.AnswerTokens += int64(r.AnswerTokens())
	if r.TTFTAnswer <= 0 {
		c.Unanswered++
		return
	}
	th := r.Thinking()
	a.recordDur(s.thinking, end, th)
	if a.cfg.TTFTBasis != BasisFirst {
		// The client stages then run on to the answer: thinking is the
		// last of them, so they add up to the answer TTFT.
		a.recordStage(event.StageThinking, end, th)
	}
}

// basis is the run's TTFT basis.
func (a *Aggregator) basis() TTFTBasis {
	if a.cfg.TTFTBasis == "" {
		return BasisAnswer
	}
	return a.cfg.TTFTBasis
}

// TTFTFor is the TTFT statistics the objectives and the bar use: the
// answer TTFT unless the basis is the first token. Without reasoning the
// two are the same.
func (s Summary) TTFTFor() Stats {
	if s.TTFTBasis == BasisFirst {
		return s.TTFT
	}
	return s.TTFTAnswer
}

// TTFTLabel says in a few words what the TTFT the bar and the objectives
// use measures to, for headers.
func TTFTLabel(basis TTFTBasis, reasoned bool) string {
	switch {
	case !reasoned:
		return "TTFT"
	case basis == BasisFirst:
		return "TTFT to the first token (reasoning included)"
	}
	return "TTFT to the answer (after the thinking)"
}

// writeReasoning says, for a run whose model reasoned, how its output
// split and which TTFT the objectives used.
func writeReasoning(w *errWriter, s Summary) {
	r := s.Reasoning
	if r == nil {
		return
	}
	w.printf("  Reasoning: %d requests thought first (%d never answered): %d reasoning and %d answer tokens\n",
		r.Requests, r.Unanswered, r.ReasoningTokens, r.AnswerTokens)
	w.printf("  %s is what the TTFT bar and --slo's ttft use (--ttft-basis %s)\n",
		TTFTLabel(s.TTFTBasis, true), cmpBasis(s.TTFTBasis))
}

func cmpBasis(b TTFTBasis) TTFTBasis {
	if b == "" {
		return BasisAnswer
	}
	return b
}

// answerStatus is the status line's part for a reasoning model: the answer
// TTFT beside the first token's ("" when no request reasoned).
func answerStatus(s Snapshot, w WindowStats) string {
	if s.Reasoning == nil || w.TTFTAnswer.Count == 0 {
		return ""
	}
	return fmt.Sprintf(", to the answer p50 %.2f ms p99 %.2f ms", w.TTFTAnswer.P50, w.TTFTAnswer.P99)
}
