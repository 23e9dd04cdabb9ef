package sim

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// reasoningDelta is the part of a chat chunk a reasoning test reads.
type reasoningDelta struct {
	Choices []struct {
		Delta struct {
			Content          *string `json:"content"`
			Reasoning        *string `json:"reasoning"`
			ReasoningContent *string `json:"reasoning_content"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

func TestReasoningChatStream(t *testing.T) {
	t.Parallel()
	for _, field := range []string{ReasoningField, ReasoningContentField} {
		t.Run(field, func(t *testing.T) {
			t.Parallel()
			_, url := startServer(t, Config{Profile: tinyProfile(t), Reasoning: Reasoning{Tokens: 5, Field: field}})
			res := post(testCtx(t, 10*time.Second), url, "/v1/chat/completions", chatBody("hello there", 8, true), nil)
			if res.err != nil || res.status != http.StatusOK || !res.done {
				t.Fatalf("status %d, err %v, done %v", res.status, res.err, res.done)
			}
			var kinds []string
			var u *usage
			for _, e := range res.events {
				var c reasoningDelta
				if err := json.Unmarshal(e.data, &c); err != nil {
					t.Fatal(err)
				}
				if c.Usage != nil {
					u = c.Usage
				}
				if len(c.Choices) == 0 {
					continue
				}
				d := c.Choices[0].Delta
				switch {
				case d.Reasoning != nil && *d.Reasoning != "":
					kinds = append(kinds, ReasoningField)
				case d.ReasoningContent != nil && *d.ReasoningContent != "":
					kinds = append(kinds, ReasoningContentField)
				case d.Content != nil && *d.Content != "":
					kinds = append(kinds, "content")
				}
			}
			want := strings.Repeat(field+" ", 5) + strings.Repeat("content ", 3)
			if got := strings.Join(kinds, " ") + " "; got != want {
				t.Errorf("deltas %q, want %q", got, want)
			}
			if u == nil || u.CompletionTokens != 8 || u.CompletionTokensDetails == nil || u.CompletionTokensDetails.ReasoningTokens != 5 {
				t.Errorf("usage %+v, want 8 completion tokens of which 5 reasoning", u)
			}
		})
	}
}

// responsesEventOf is the part of a Responses event a test reads.
type responsesEventOf struct {
	Type           string          `json:"type"`
	SequenceNumber int             `json:"sequence_number"`
	Delta          string          `json:"delta"`
	Response       *responseObject `json:"response"`
}

func TestResponsesStream(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{Profile: tinyProfile(t), Reasoning: Reasoning{Tokens: 2}})
	body := map[string]any{"model": DefaultModel, "input": "hello there", "stream": true, "max_output_tokens": 6}
	res := post(testCtx(t, 10*time.Second), url, "/v1/responses", body, nil)
	// The helper reads to [DONE], which a Responses stream does not send.
	if res.err != nil && !errors.Is(res.err, io.ErrUnexpectedEOF) || res.status != http.StatusOK {
		t.Fatalf("status %d, err %v, body %s", res.status, res.err, res.body)
	}
	var types []string
	var last responsesEventOf
	for i, e := range res.events {
		var ev responsesEventOf
		if err := json.Unmarshal(e.data, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.SequenceNumber != i {
			t.Errorf("event %d has sequence number %d", i, ev.SequenceNumber)
		}
		types = append(types, ev.Type)
		last = ev
	}
	want := []string{evResponseCreated, evReasoningTextDelta, evReasoningTextDelta,
		evOutputTextDelta, evOutputTextDelta, evOutputTextDelta, evOutputTextDelta, evResponseIncomplete}
	if strings.Join(types, ",") != strings.Join(want, ",") {
		t.Errorf("events %v, want %v", types, want)
	}
	if r := last.Response; r == nil || r.Usage == nil || r.Usage.OutputTokens != 6 || r.Usage.OutputTokensDetails.ReasoningTokens != 2 ||
		r.Usage.InputTokens == 0 || r.Status != "incomplete" {
		t.Errorf("final response %+v", last.Response)
	}
	if res.done {
		t.Error("a Responses stream sent [DONE]")
	}
}

func TestResponsesRequests(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{Profile: tinyProfile(t)})
	ctx := testCtx(t, 10*time.Second)
	res := post(ctx, url, "/v1/responses", map[string]any{
		"input":  []map[string]any{{"role": "user", "content": []map[string]any{{"type": "input_text", "text": "hi"}}}},
		"stream": false, "max_output_tokens": 3}, nil)
	if res.status != http.StatusOK || !strings.Contains(string(res.body), `"output_text"`) {
		t.Errorf("non-streaming: status %d, body %s", res.status, res.body)
	}
	for _, bad := range []map[string]any{
		{"stream": true},
		{"input": 3, "stream": true},
		{"input": []any{}, "stream": true},
		{"input": "x", "max_output_tokens": 0, "stream": true},
	} {
		if res := post(ctx, url, "/v1/responses", bad, nil); res.status != http.StatusBadRequest {
			t.Errorf("%v: status %d, want 400 (%s)", bad, res.status, res.body)
		}
	}
}

func TestParseReasoningField(t *testing.T) {
	for in, want := range map[string]string{"": ReasoningField, "reasoning": ReasoningField, "reasoning_content": ReasoningContentField} {
		if got, err := ParseReasoningField(in); err != nil || got != want {
			t.Errorf("%q: %q, %v", in, got, err)
		}
	}
	if _, err := ParseReasoningField("thinking"); err == nil {
		t.Error("thinking accepted")
	}
}
