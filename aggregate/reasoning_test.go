package aggregate

import (
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// thinkingReq is a reasoning model's request: n reasoning chunks from
// ttft, itl apart, then m answer chunks.
func thinkingReq(at time.Time, ttft, itl time.Duration, n, m int) *event.Request {
	r := okReq(at, ttft, itl, n+m)
	r.ReasoningTokens = n
	if m > 0 {
		r.TTFTAnswer = ttft + time.Duration(n)*itl
	}
	return r
}

func TestReasoningSummary(t *testing.T) {
	t.Parallel()
	for _, basis := range []TTFTBasis{"", BasisAnswer, BasisFirst} {
		objectives, err := ParseSLO("ttft.p99<100ms")
		if err != nil {
			t.Fatal(err)
		}
		a := New(Config{SLO: objectives, TTFTBasis: basis})
		t0 := base()
		// Thinking for 20 × 10 ms after a 50 ms first token: the answer at 250 ms.
		addAll(a, thinkingReq(t0, 50*time.Millisecond, 10*time.Millisecond, 20, 5),
			thinkingReq(t0.Add(time.Second), 50*time.Millisecond, 10*time.Millisecond, 20, 5),
			thinkingReq(t0.Add(2*time.Second), 50*time.Millisecond, 10*time.Millisecond, 4, 0)) // never answered
		s := a.Summary()
		if s.TTFT.Count != 3 || s.TTFT.Max != 50 {
			t.Errorf("%q: ttft %+v, want 3 at 50 ms", basis, s.TTFT)
		}
		if s.TTFTAnswer.Count != 2 || s.TTFTAnswer.Max != 250 || s.TTFTAnswer.P50 != 250 {
			t.Errorf("%q: ttft_answer %+v, want 2 at 250 ms", basis, s.TTFTAnswer)
		}
		if s.Thinking == nil || s.Thinking.Count != 2 || s.Thinking.Mean != 200 {
			t.Errorf("%q: thinking %+v, want 2 of 200 ms", basis, s.Thinking)
		}
		if s.TTST.Count != 3 || s.TTST.Max != 60 {
			t.Errorf("%q: ttst %+v, want 3 at 60 ms", basis, s.TTST)
		}
		want := Reasoning{Requests: 3, Unanswered: 1, ReasoningTokens: 44, AnswerTokens: 10}
		if s.Reasoning == nil || *s.Reasoning != want {
			t.Errorf("%q: reasoning %+v, want %+v", basis, s.Reasoning, want)
		}
		res := Evaluate(s, objectives)[0]
		wantBasis, wantPass, wantGood := BasisAnswer, false, int64(0)
		if basis == BasisFirst {
			wantBasis, wantPass, wantGood = BasisFirst, true, 3
		}
		if s.TTFTBasis != wantBasis || res.Pass != wantPass {
			t.Errorf("%q: basis %q, slo %+v; want %q, pass %v", basis, s.TTFTBasis, res, wantBasis, wantPass)
		}
		if s.Requests.Good == nil || *s.Requests.Good != wantGood {
			t.Errorf("%q: good %v, want %d", basis, s.Requests.Good, wantGood)
		}
		_, hasThinkingStage := s.Stages[event.StageThinking]
		if hasThinkingStage == (basis == BasisFirst) {
			t.Errorf("%q: client stages %v: thinking only on the answer basis", basis, s.Stages)
		}
	}
}

// Without reasoning the answer TTFT is the TTFT and nothing else is said.
func TestNoReasoningSummary(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	addAll(a, okReq(base(), 30*time.Millisecond, 5*time.Millisecond, 4), okReq(base().Add(time.Second), 40*time.Millisecond, 5*time.Millisecond, 1))
	s := a.Summary()
	if s.TTFTAnswer != s.TTFT || s.Reasoning != nil || s.Thinking != nil || s.TTFTFor() != s.TTFT {
		t.Errorf("ttft %+v, answer %+v, reasoning %v, thinking %v", s.TTFT, s.TTFTAnswer, s.Reasoning, s.Thinking)
	}
	if s.TTST.Count != 1 || s.TTST.Max != 35 {
		t.Errorf("ttst %+v, want one of 35 ms", s.TTST)
	}
}

// The TTFT bar of requests with a breakdown runs on to the answer, with
// thinking as its last segment, on the answer basis only.
func TestReasoningBands(t *testing.T) {
	t.Parallel()
	for _, basis := range []TTFTBasis{BasisAnswer, BasisFirst} {
		a := New(Config{TTFTBasis: basis})
		r := thinkingReq(base(), 50*time.Millisecond, 10*time.Millisecond, 20, 5)
		r.Breakdown = []event.StageTiming{{Stage: event.StagePrefill, Duration: 50 * time.Millisecond, Provenance: event.ServerReported}}
		addAll(a, r)
		band := a.Snapshot(base().Add(time.Second)).Windows[WinRun].Bands[BandMean]
		want, thinking := 250.0, 200.0
		if basis == BasisFirst {
			want, thinking = 50, 0
		}
		if band.TTFT != want || band.Stages[event.StageThinking] != thinking || band.Stages[event.StagePrefill] != 50 {
			t.Errorf("%s: band %+v, want ttft %v with thinking %v", basis, band, want, thinking)
		}
	}
}

func TestStatusLineShowsTheAnswer(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	addAll(a, thinkingReq(base(), 50*time.Millisecond, 10*time.Millisecond, 20, 5))
	line := StatusLine(a.Snapshot(base().Add(time.Second)))
	if !strings.Contains(line, "TTFT p50 50.00 ms p99 50.00 ms, to the answer p50 250.00 ms p99 250.00 ms") {
		t.Errorf("status line %q", line)
	}
	b := New(Config{})
	addAll(b, okReq(base(), 50*time.Millisecond, 10*time.Millisecond, 3))
	if line := StatusLine(b.Snapshot(base().Add(time.Second))); strings.Contains(line, "answer") {
		t.Errorf("status line without reasoning %q", line)
	}
}
