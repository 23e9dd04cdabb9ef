package report

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// A recording of a reasoning model keeps its answer times and token split
// (new optional fields of the request events), and the reports show the
// answer TTFT, the thinking stage, the time to the second token and the
// counts beside the TTFT.
func TestReportsShowReasoning(t *testing.T) {
	t.Parallel()
	s := defaultSynth(3)
	s.duration = 10 * time.Second
	evs := s.events()
	const thinking = 10 // of each request's 32 chunks
	for _, ev := range evs {
		if r := ev.Request; r != nil && r.OK() {
			r.ReasoningTokens = thinking
			r.TTFTAnswer = r.TTFT + r.Chunks[thinking].At - r.Chunks[0].At
		}
	}
	rec, err := Load(writeRecording(t, t.TempDir(), "reasoning.zst", s.sessionHeader(), evs, 50))
	if err != nil {
		t.Fatal(err)
	}
	sum := rec.Summary
	if sum.Reasoning == nil || sum.Reasoning.ReasoningTokens != thinking*sum.Requests.OK || sum.TTFTAnswer.Count != sum.Requests.OK ||
		sum.TTFTAnswer.Mean <= sum.TTFT.Mean+80 {
		t.Fatalf("summary: reasoning %+v, ttft %+v, ttft_answer %+v", sum.Reasoning, sum.TTFT, sum.TTFTAnswer)
	}
	for _, format := range []Format{Markdown, CSV} {
		var buf bytes.Buffer
		if err := Write(&buf, format, rec); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		wants := []string{"| ttft_answer |", "| thinking |", "| ttst |", "A reasoning model: ", "TTFT to the answer (after the thinking)"}
		if format == CSV {
			wants = []string{"latency,ttft_answer,", "latency,thinking,", "latency,ttst,", "reasoning,reasoning_tokens,", "reasoning,answer_tokens,", "band,thinking,"}
		}
		for _, want := range wants {
			if !strings.Contains(out, want) {
				t.Errorf("%v lacks %q", format, want)
			}
		}
	}
}
