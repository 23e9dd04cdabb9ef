package probe

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/latscope/latscope/event"
)

// openAIDialect speaks the OpenAI streaming API (vLLM, SGLang, llama.cpp,
// TGI and Ollama OpenAI routes): SSE chunks ending with data: [DONE]. chat
// selects /v1/chat/completions over /v1/completions.
type openAIDialect struct{ chat bool }

func (d openAIDialect) name() string {
	if d.chat {
		return DialectOpenAIChat
	}
	return DialectOpenAICompletions
}

func (d openAIDialect) path() string {
	if d.chat {
		return "/v1/chat/completions"
	}
	return "/v1/completions"
}

func (openAIDialect) endMarker() string { return "data: [DONE]" }
func (openAIDialect) ndjson() bool      { return false }
func (openAIDialect) asksUsage() bool   { return true }

type openAIRequest struct {
	Model         string        `json:"model,omitempty"`
	Messages      []chatMessage `json:"messages,omitempty"`
	Prompt        *string       `json:"prompt,omitempty"`
	Stream        bool          `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// Fixed output length: max_tokens plus the vLLM/SGLang extras that stop
	// an early end-of-sequence. Others ignore them.
	MaxTokens int  `json:"max_tokens,omitempty"`
	MinTokens int  `json:"min_tokens,omitempty"`
	IgnoreEOS bool `json:"ignore_eos,omitempty"`
}

func (d openAIDialect) body(model string, spec RequestSpec) ([]byte, error) {
	req := openAIRequest{Model: model, Stream: true}
	req.StreamOptions.IncludeUsage = true
	if d.chat {
		req.Messages = spec.chatMessages()
	} else {
		prompt := spec.fullPrompt()
		req.Prompt = &prompt
	}
	if spec.OutputTokens > 0 {
		req.MaxTokens = spec.OutputTokens
		req.MinTokens = spec.OutputTokens
		req.IgnoreEOS = true
	}
	return json.Marshal(req)
}

// parse is the hot path: a plain content chunk is scanned for its content
// string in one pass over its keys; a chunk carrying a finish reason, usage,
// metrics, timings or an error, or not shaped as expected, is decoded in
// full. The scan checks the framing and the content string, not the rest
// of the JSON (see wire_scan.go).
func (d openAIDialect) parse(data []byte, c *chunkInfo) error {
	return d.parseStream(data, c, nil)
}

// parseStream is parse for one chunk of a stream whose chunk shape is
// remembered in shape (nil: none). A server's content chunks differ only
// in their content string, so once the key walk has accepted one chunk, a
// chunk with the same bytes around its string needs only that string
// scanned (see chunkShape).
func (d openAIDialect) parseStream(data []byte, c *chunkInfo, shape *chunkShape) error {
	data = bytes.TrimSpace(data)
	if shape != nil {
		if v, ok := shape.match(data); ok {
			c.setText(v, shape.reasoning)
			return nil
		}
	}
	if string(data) == "[DONE]" {
		c.end = true
		return nil
	}
	if !jsonObject(data) {
		return malformed(d.name(), data, errNotObject)
	}
	content, reasoning, plain := d.walkKeys(data)
	if !plain {
		return d.parseFull(data, c)
	}
	v, st := scanAt(data, content)
	at := content // where the string taken starts
	if d.chat && (st != fieldString || !v.nonEmpty) && reasoning >= 0 {
		// Reasoning models stream their thinking first, in another field.
		rv, rst := scanAt(data, reasoning)
		switch rst {
		case fieldString:
			v, st, at = rv, rst, reasoning
		case fieldOther:
			st = fieldOther
		}
	}
	switch st {
	case fieldNull:
		return nil
	case fieldString:
		if v.nonEmpty {
			c.setText(v, at == reasoning)
			if shape != nil {
				shape.remember(data, at, v.end, c.reasoning)
			}
		}
		return nil
	}
	return d.parseFull(data, c)
}

// walkKeys finds where data's content and reasoning strings start (-1:
// none, or not a string or null). plain is false when a key asks for the
// full decode: a finish reason or usage that is not null, an error,
// metrics or timings.
func (d openAIDialect) walkKeys(data []byte) (content, reasoning int, plain bool) {
	contentKey := "text"
	if d.chat {
		contentKey = "content"
	}
	content, reasoning = -1, -1
	for i := 0; ; {
		key, v, next := nextKey(data, i)
		if next < 0 {
			return content, reasoning, true
		}
		i = next
		// Comparisons, not switch string(key): they do not copy the key.
		switch {
		case string(key) == contentKey:
			if content < 0 && stringOrNull(data[v]) {
				content = v
			}
		case string(key) == "reasoning_content" || string(key) == "reasoning":
			if reasoning < 0 && stringOrNull(data[v]) {
				reasoning = v
			}
		case string(key) == "finish_reason" || string(key) == "usage":
			if data[v] != 'n' {
				return content, reasoning, false
			}
		case string(key) == "error" || string(key) == "metrics" || string(key) == "timings":
			return content, reasoning, false
		}
	}
}

// chunkShape remembers, for one stream, the bytes around the content
// string of the last chunk that parse's key walk took as a plain content
// chunk (no finish reason, usage, metrics, timings or error). A chunk
// with the same bytes before and after its string gets the same result
// from the walk: the walk's keys all lie outside that string (a quote
// inside a valid JSON string is escaped, so no key can end there), and so
// do the other values it looks at. Only the string is then scanned. The
// zero value remembers nothing.
type chunkShape struct {
	around    []byte // the bytes before the string, then those after it
	before    int    // how many of around come before the string
	ok        bool   // around holds a shape
	reasoning bool   // the string is a reasoning field's, not the content's
}

// match scans data's content string when data has the remembered shape.
// ok is false when it does not, or when the string is not a well-formed,
// non-empty one: the key walk decides those.
func (s *chunkShape) match(data []byte) (v stringValue, ok bool) {
	if !s.ok || len(data) <= len(s.around) || !bytes.Equal(data[:s.before], s.around[:s.before]) {
		return v, false
	}
	v, ok = scanString(data, s.before)
	if !ok || !v.nonEmpty || !bytes.Equal(data[v.end:], s.around[s.before:]) {
		return v, false
	}
	return v, true
}

// remember records data's shape: its string runs from data[start] (the
// opening quote) to data[end-1] (the closing one).
func (s *chunkShape) remember(data []byte, start, end int, reasoning bool) {
	s.around = append(append(s.around[:0], data[:start]...), data[end:]...)
	s.before = start
	s.ok = true
	s.reasoning = reasoning // a reasoning field's string, not the content's
}

type openAIChunk struct {
	Object  string `json:"object"`
	Message string `json:"message"` // {"object":"error","message":...}
	Choices []struct {
		Delta struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
		} `json:"delta"`
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage   *usageCounts    `json:"usage"`
	Metrics *vllmMetrics    `json:"metrics"`
	Timings *llamaTimings   `json:"timings"`
	Error   json.RawMessage `json:"error"`
}

func (d openAIDialect) parseFull(data []byte, c *chunkInfo) error {
	var ch openAIChunk
	if err := json.Unmarshal(data, &ch); err != nil {
		return malformed(d.name(), data, err)
	}
	if msg := errorMessage(ch.Error); msg != "" {
		c.serverErr = msg
		return nil
	}
	if ch.Object == "error" {
		c.serverErr = "error event: " + ch.Message
		return nil
	}
	for _, choice := range ch.Choices {
		text := firstNonEmpty(choice.Text, choice.Delta.Content)
		if text == "" {
			// Reasoning models stream their thinking first, in another field.
			if text = firstNonEmpty(choice.Delta.ReasoningContent, choice.Delta.Reasoning); text != "" {
				c.reasoning = true
			}
		}
		if text != "" {
			c.tokens = 1
			c.replacements += countRunesFFFD(text)
			c.text += text
		}
	}
	// Ollama puts a zeroed usage object on every /v1/completions chunk:
	// only non-zero counts are usage.
	if u := ch.Usage; u != nil && (u.PromptTokens > 0 || u.CompletionTokens > 0) {
		c.usage = true
		c.promptTokens = u.PromptTokens
		c.outputTokens = u.CompletionTokens
		c.cachedTokens = u.cachedTokens()
		c.reasonTokens = u.reasoningTokens()
	}
	switch {
	case ch.Metrics != nil:
		c.timing = ch.Metrics.serverTiming()
	case ch.Timings != nil:
		c.timing = ch.Timings.serverTiming()
	}
	if c.timing != nil && c.usage {
		c.timing.PromptTokens = c.promptTokens
		c.timing.OutputTokens = c.outputTokens
		if c.cachedTokens > 0 {
			c.timing.CachedTokens = c.cachedTokens
		}
	}
	return nil
}

func firstNonEmpty(ss ...*string) string {
	for _, s := range ss {
		if s != nil && *s != "" {
			return *s
		}
	}
	return ""
}

// vllmMetrics is vLLM's per-request metrics object on the usage chunk
// (--enable-per-request-metrics), in milliseconds.
type vllmMetrics struct {
	QueueTimeMs      *float64 `json:"queue_time_ms"`
	TTFTMs           *float64 `json:"time_to_first_token_ms"`
	GenerationTimeMs *float64 `json:"generation_time_ms"`
	MeanITLMs        *float64 `json:"mean_itl_ms"`
}

// StageMeanITL is the key under which a server's own mean inter-token
// latency is kept in event.ServerTiming.Stages (vLLM's mean_itl_ms). It is
// a per-token mean, not a slice of the request: never sum it with others.
const StageMeanITL event.Stage = "mean_itl"

func (m *vllmMetrics) serverTiming() *event.ServerTiming {
	st := &event.ServerTiming{Source: "vllm.metrics", Stages: make(map[event.Stage]time.Duration, 4)}
	if m.QueueTimeMs != nil {
		st.Stages[event.StageQueue] = msDuration(*m.QueueTimeMs)
	}
	// vLLM's per-request time_to_first_token_ms runs from scheduling, not
	// arrival: it is the interval vLLM calls prefill (first_token_ts -
	// scheduled_ts), not the server TTFT.
	if m.TTFTMs != nil {
		st.Stages[event.StagePrefill] = msDuration(*m.TTFTMs)
	}
	if m.GenerationTimeMs != nil {
		st.Stages[event.StageDecode] = msDuration(*m.GenerationTimeMs)
	}
	if m.MeanITLMs != nil {
		st.Stages[StageMeanITL] = msDuration(*m.MeanITLMs)
	}
	return st
}
