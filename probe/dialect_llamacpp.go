package probe

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/latscope/latscope/event"
)

// llamaCppDialect speaks llama.cpp's native POST /completion: SSE events
// with "content" and "tokens", the last one "stop": true with counts and
// timings, and no [DONE].
type llamaCppDialect struct{}

func (llamaCppDialect) name() string      { return DialectLlamaCpp }
func (llamaCppDialect) path() string      { return "/completion" }
func (llamaCppDialect) endMarker() string { return `an event with "stop": true` }
func (llamaCppDialect) ndjson() bool      { return false }
func (llamaCppDialect) asksUsage() bool   { return true } // the final event always has the counts

type llamaCppRequest struct {
	Model     string `json:"model,omitempty"`
	Prompt    string `json:"prompt"`
	Stream    bool   `json:"stream"`
	NPredict  int    `json:"n_predict,omitempty"`
	IgnoreEOS bool   `json:"ignore_eos,omitempty"`
}

func (llamaCppDialect) body(model string, spec RequestSpec) ([]byte, error) {
	req := llamaCppRequest{Model: model, Prompt: spec.fullPrompt(), Stream: true}
	if spec.OutputTokens > 0 {
		req.NPredict = spec.OutputTokens
		req.IgnoreEOS = true
	}
	return json.Marshal(req)
}

func (d llamaCppDialect) parse(data []byte, c *chunkInfo) error {
	data = bytes.TrimSpace(data)
	if !jsonObject(data) {
		return malformed(d.name(), data, errNotObject)
	}
	content, tokens := -1, -1
	for i := 0; ; {
		key, v, next := nextKey(data, i)
		if next < 0 {
			break
		}
		i = next
		// Comparisons, not switch string(key): they do not copy the key.
		switch {
		case string(key) == "content":
			if content < 0 {
				content = v
			}
		case string(key) == "tokens":
			if tokens < 0 {
				tokens = v
			}
		case string(key) == "stop":
			if data[v] != 'f' {
				return d.parseFull(data, c)
			}
		case string(key) == "timings" || string(key) == "error":
			return d.parseFull(data, c)
		}
	}
	v, st := scanAt(data, content)
	if st != fieldString {
		return d.parseFull(data, c)
	}
	n, ok := countArray(data, tokens)
	if tokens >= 0 && !ok {
		return d.parseFull(data, c)
	}
	if n > 0 {
		c.tokens = n
	} else if v.nonEmpty {
		c.tokens = 1
	}
	if c.tokens > 0 {
		c.replacements, c.quoted = v.replacements, v.quoted
	}
	return nil
}

type llamaCppChunk struct {
	Content         string          `json:"content"`
	Tokens          []int64         `json:"tokens"`
	Stop            bool            `json:"stop"`
	TokensPredicted int             `json:"tokens_predicted"`
	TokensEvaluated int             `json:"tokens_evaluated"`
	Timings         *llamaTimings   `json:"timings"`
	Error           json.RawMessage `json:"error"`
}

func (d llamaCppDialect) parseFull(data []byte, c *chunkInfo) error {
	var ch llamaCppChunk
	if err := json.Unmarshal(data, &ch); err != nil {
		return malformed(d.name(), data, err)
	}
	if msg := errorMessage(ch.Error); msg != "" {
		c.serverErr = msg
		return nil
	}
	switch {
	case len(ch.Tokens) > 0:
		c.tokens = len(ch.Tokens)
	case ch.Content != "":
		c.tokens = 1
	}
	if c.tokens > 0 {
		c.replacements, c.text = countRunesFFFD(ch.Content), ch.Content
	}
	if ch.Stop {
		c.end = true
		c.usage = true
		c.promptTokens = ch.TokensEvaluated
		c.outputTokens = ch.TokensPredicted
	}
	if ch.Timings != nil {
		c.timing = ch.Timings.serverTiming()
	}
	return nil
}

// llamaTimings is llama.cpp's per-request "timings" object, in
// milliseconds. It has no queue or tokenization time.
type llamaTimings struct {
	CacheN      int     `json:"cache_n"`
	PromptN     int     `json:"prompt_n"`
	PromptMs    float64 `json:"prompt_ms"`
	PredictedN  int     `json:"predicted_n"`
	PredictedMs float64 `json:"predicted_ms"`
}

func (t *llamaTimings) serverTiming() *event.ServerTiming {
	return &event.ServerTiming{
		Source: "llamacpp.timings",
		Stages: map[event.Stage]time.Duration{
			event.StagePrefill: msDuration(t.PromptMs),    // prompt processing; cached tokens excluded
			event.StageDecode:  msDuration(t.PredictedMs), // generation
		},
		PromptTokens: t.PromptN + t.CacheN,
		OutputTokens: t.PredictedN,
		CachedTokens: t.CacheN, // reused from the slot's or the host's prompt cache
	}
}
