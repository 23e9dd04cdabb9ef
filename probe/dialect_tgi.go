package probe

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/latscope/latscope/event"
)

// tgiDialect speaks Hugging Face TGI's POST /generate_stream: SSE events
// written data:{...} without a space, one token each, the last one with a
// non-null generated_text and (as we ask for details) the token counts, and
// no [DONE]. TGI has no ignore_eos: a model may stop early.
type tgiDialect struct{}

func (tgiDialect) name() string      { return DialectTGI }
func (tgiDialect) path() string      { return "/generate_stream" }
func (tgiDialect) endMarker() string { return "an event with generated_text" }
func (tgiDialect) ndjson() bool      { return false }
func (tgiDialect) asksUsage() bool   { return true } // details: true

type tgiRequest struct {
	Inputs     string `json:"inputs"`
	Parameters struct {
		MaxNewTokens int  `json:"max_new_tokens,omitempty"`
		Details      bool `json:"details"`
	} `json:"parameters"`
}

func (tgiDialect) body(_ string, spec RequestSpec) ([]byte, error) {
	req := tgiRequest{Inputs: spec.fullPrompt()}
	req.Parameters.MaxNewTokens = spec.OutputTokens
	req.Parameters.Details = true
	return json.Marshal(req)
}

func (d tgiDialect) parse(data []byte, c *chunkInfo) error {
	data = bytes.TrimSpace(data)
	if !jsonObject(data) {
		return malformed(d.name(), data, errNotObject)
	}
	token, text := false, -1
	for i := 0; ; {
		key, v, next := nextKey(data, i)
		if next < 0 {
			break
		}
		i = next
		// Comparisons, not switch string(key): they do not copy the key.
		switch {
		case string(key) == "token":
			token = data[v] == '{'
		case string(key) == "text":
			if token && text < 0 {
				text = v
			}
		case string(key) == "generated_text" || string(key) == "details":
			if data[v] != 'n' {
				return d.parseFull(data, c)
			}
		case string(key) == "error":
			return d.parseFull(data, c)
		}
	}
	v, st := scanAt(data, text)
	if st != fieldString {
		return d.parseFull(data, c)
	}
	// Every event is one generated token, special tokens included.
	c.tokens = 1
	c.replacements, c.quoted = v.replacements, v.quoted
	return nil
}

type tgiChunk struct {
	Token *struct {
		Text    string `json:"text"`
		Special bool   `json:"special"`
	} `json:"token"`
	GeneratedText *string `json:"generated_text"`
	Details       *struct {
		FinishReason    string `json:"finish_reason"`
		GeneratedTokens int    `json:"generated_tokens"`
		InputLength     int    `json:"input_length"`
	} `json:"details"`
	Error     json.RawMessage `json:"error"`
	ErrorType string          `json:"error_type"`
}

func (d tgiDialect) parseFull(data []byte, c *chunkInfo) error {
	var ch tgiChunk
	if err := json.Unmarshal(data, &ch); err != nil {
		return malformed(d.name(), data, err)
	}
	if msg := errorMessage(ch.Error); msg != "" {
		if ch.ErrorType != "" {
			msg = ch.ErrorType + ": " + msg
		}
		c.serverErr = msg
		return nil
	}
	if ch.Token != nil {
		c.tokens = 1
		c.replacements, c.text = countRunesFFFD(ch.Token.Text), ch.Token.Text
	}
	if ch.Details != nil {
		c.usage = true
		c.promptTokens = ch.Details.InputLength
		c.outputTokens = ch.Details.GeneratedTokens
	}
	c.end = ch.GeneratedText != nil
	return nil
}

// tgiHeaderTiming reads TGI's per-request timing headers (X-Queue-Time and
// the like, in milliseconds).
// TGI sends them only on non-streaming responses, so a stream normally has
// none; they are recorded whenever present, whatever the dialect.
func tgiHeaderTiming(h http.Header) *event.ServerTiming {
	if h.Get("X-Total-Time") == "" && h.Get("X-Queue-Time") == "" {
		return nil
	}
	st := &event.ServerTiming{Source: "tgi.headers", Stages: make(map[event.Stage]time.Duration, 4)}
	for _, f := range []struct {
		header string
		stage  event.Stage
	}{
		{"X-Validation-Time", event.StageTokenize}, // validation includes tokenization
		{"X-Queue-Time", event.StageQueue},
		{"X-Inference-Time", event.StageInference},
		{"X-Total-Time", event.StageServerE2E},
	} {
		if ms, err := strconv.ParseFloat(strings.TrimSpace(h.Get(f.header)), 64); err == nil {
			st.Stages[f.stage] = msDuration(ms)
		}
	}
	st.PromptTokens, _ = strconv.Atoi(h.Get("X-Prompt-Tokens"))
	st.OutputTokens, _ = strconv.Atoi(h.Get("X-Generated-Tokens"))
	return st
}
