package event

import (
	"strings"
	"testing"
	"time"
)

// A recording written before reasoning was measured decodes as a request
// that did not reason; a reasoning request's fields round-trip, and a
// request that did not reason writes none of them.
func TestReasoningFieldsAreOptional(t *testing.T) {
	old := `{"v":1,"kind":"request","request":{"id":"a","seq":0,"dialect":"openai-chat","prompt_tokens":3,"output_tokens":2,` +
		`"intended":"2026-11-29T12:00:00Z","start":"2026-11-29T12:00:00Z","ttft_ns":5000000,"e2e_ns":9000000,` +
		`"chunks":[{"t":5000000,"n":1},{"t":9000000,"n":1}],"outcome":"ok"}}`
	ev, err := Unmarshal([]byte(old))
	if err != nil {
		t.Fatal(err)
	}
	r := ev.Request
	if r.Reasoned() || r.AnswerTTFT() != r.TTFT || r.Thinking() != 0 || r.AnswerTokens() != 2 || r.TTST() != 9*time.Millisecond {
		t.Errorf("old record: reasoned %v, answer ttft %v, thinking %v, answer tokens %d, ttst %v",
			r.Reasoned(), r.AnswerTTFT(), r.Thinking(), r.AnswerTokens(), r.TTST())
	}
	b, err := Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "reasoning") || strings.Contains(string(b), "ttft_answer") {
		t.Errorf("a request without reasoning wrote reasoning fields: %s", b)
	}

	r.ReasoningTokens, r.TTFTAnswer, r.OutputTokens = 1, 9*time.Millisecond, 2
	b, err = Marshal(NewRequest(r))
	if err != nil {
		t.Fatal(err)
	}
	back, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if g := back.Request; g.ReasoningTokens != 1 || g.TTFTAnswer != 9*time.Millisecond || g.Thinking() != 4*time.Millisecond || g.AnswerTokens() != 1 {
		t.Errorf("round trip: %+v", g)
	}
}
