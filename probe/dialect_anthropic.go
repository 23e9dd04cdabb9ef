package probe

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
)

// DialectAnthropicMessages is the Anthropic Messages API: POST /v1/messages
// with stream: true (Anthropic, vLLM, llama.cpp, Ollama and gateways).
const DialectAnthropicMessages = "anthropic-messages"

// anthropicVersion is the API version the dialect sends in the
// anthropic-version header, which Anthropic requires on every call. A
// --header of that name replaces it.
const anthropicVersion = "2023-06-01"

// The Messages API's credential and version headers.
const (
	headerAnthropicKey     = "X-Api-Key"
	headerAnthropicVersion = "Anthropic-Version"
)

// anthropicDialect speaks the Messages API's stream: SSE events named by
// their type (repeated in the data's "type"): message_start (the prompt's
// usage), then per content block content_block_start, content_block_delta
// (text_delta: answer; thinking_delta: reasoning) and content_block_stop,
// then message_delta (the stop reason and the output tokens) and
// message_stop, the end. ping may come at any time, error ends a failed
// stream. There is no [DONE].
type anthropicDialect struct{}

func (anthropicDialect) name() string      { return DialectAnthropicMessages }
func (anthropicDialect) path() string      { return "/v1/messages" }
func (anthropicDialect) endMarker() string { return "a message_stop event" }
func (anthropicDialect) ndjson() bool      { return false }
func (anthropicDialect) asksUsage() bool   { return true } // message_delta always carries it

// anthropicDefaultMaxTokens is max_tokens when the spec asks for no length:
// the API requires one.
const anthropicDefaultMaxTokens = 1024

type anthropicRequest struct {
	Model     string        `json:"model"`
	MaxTokens int           `json:"max_tokens"`
	Messages  []chatMessage `json:"messages"`
	Stream    bool          `json:"stream"`
}

// body asks for max_tokens only: the Messages API has no min tokens or
// ignore_eos (Anthropic refuses unknown fields), so the model may end its
// answer sooner. It asks for no thinking either: whether a model thinks is
// the server's (a reasoning model served by vLLM always does).
func (anthropicDialect) body(model string, spec RequestSpec) ([]byte, error) {
	req := anthropicRequest{Model: model, MaxTokens: spec.OutputTokens, Stream: true,
		Messages: spec.chatMessages()}
	if req.MaxTokens <= 0 {
		req.MaxTokens = anthropicDefaultMaxTokens
	}
	return json.Marshal(req)
}

// The event and delta types that matter.
const (
	anthMessageStart     = "message_start"
	anthBlockStart       = "content_block_start"
	anthBlockDelta       = "content_block_delta"
	anthMessageDelta     = "message_delta"
	anthMessageStop      = "message_stop"
	anthError            = "error"
	anthTextDelta        = "text_delta"
	anthThinkingDelta    = "thinking_delta"
	anthRedactedThinking = "redacted_thinking"
)

// parse is the hot path. A content delta is scanned, not decoded, when it
// starts with "type":"content_block_delta" (as Anthropic and vLLM write
// it) and its delta is a text_delta or thinking_delta: the walk finds the
// delta's type and its string, which alone is checked. Every other event
// (a handful per stream: message_start, block starts and stops, pings,
// message_delta, message_stop, errors) and anything unusual is decoded in
// full, which also validates it.
func (d anthropicDialect) parse(data []byte, c *chunkInfo) error {
	return d.parseStream(data, c, nil)
}

// parseStream is parse for one event of a stream whose content delta shape
// is remembered in shape (nil: none), as openAIDialect.parseStream does: a
// block's deltas differ only in their string, so a delta with the same
// bytes around its string as the last one the walk took needs only that
// string scanned.
func (d anthropicDialect) parseStream(data []byte, c *chunkInfo, shape *chunkShape) error {
	data = bytes.TrimSpace(data)
	if shape != nil {
		if v, ok := shape.match(data); ok {
			c.tokens = 1
			c.reasoning = shape.reasoning
			c.replacements, c.quoted = v.replacements, v.quoted
			return nil
		}
	}
	if !jsonObject(data) {
		return malformed(d.name(), data, errNotObject)
	}
	key, v, next := nextKey(data, 0)
	if next < 0 || string(key) != "type" || !stringAt(data, v, anthBlockDelta) {
		return d.parseFull(data, c)
	}
	deltaType, text, thinking, hasError := deltaKeys(data, next)
	if hasError {
		return d.parseFull(data, c)
	}
	var at int
	var reasoning bool
	switch {
	case stringAt(data, deltaType, anthTextDelta):
		at = text
	case stringAt(data, deltaType, anthThinkingDelta):
		at, reasoning = thinking, true
	default:
		return d.parseFull(data, c) // a signature, tool input or citation delta, or an odd one
	}
	sv, st := scanAt(data, at)
	if st != fieldString {
		return d.parseFull(data, c)
	}
	if sv.nonEmpty {
		c.tokens = 1
		c.reasoning = reasoning
		c.replacements, c.quoted = sv.replacements, sv.quoted
		if shape != nil {
			shape.remember(data, at, sv.end, reasoning)
		}
	}
	return nil
}

// deltaKeys walks a content delta's keys from data[from] for the values
// parse needs (the first of each; -1 when absent), and whether it has an
// error key.
func deltaKeys(data []byte, from int) (deltaType, text, thinking int, hasError bool) {
	deltaType, text, thinking = -1, -1, -1
	for i := from; ; {
		key, v, next := nextKey(data, i)
		if next < 0 {
			return deltaType, text, thinking, false
		}
		i = next
		switch {
		case string(key) == "type":
			if deltaType < 0 {
				deltaType = v
			}
		case string(key) == "text":
			if text < 0 {
				text = v
			}
		case string(key) == "thinking":
			if thinking < 0 {
				thinking = v
			}
		case string(key) == "error":
			return deltaType, text, thinking, true
		}
	}
}

// anthropicBlock is a content block as content_block_start opens it, or a
// delta of content_block_delta.
type anthropicBlock struct {
	Type     string  `json:"type"`
	Text     *string `json:"text"`
	Thinking *string `json:"thinking"`
}

// anthropicUsage is the Messages API's usage. input_tokens counts only the
// prompt tokens the server computed afresh: those read from its prompt
// cache and those written to it are counted apart.
type anthropicUsage struct {
	InputTokens         int `json:"input_tokens"`
	OutputTokens        int `json:"output_tokens"`
	CacheReadTokens     int `json:"cache_read_input_tokens"`
	CacheCreationTokens int `json:"cache_creation_input_tokens"`
}

// anthropicEvent is the decoded form of the events parse does not scan.
type anthropicEvent struct {
	Type    string `json:"type"`
	Message *struct {
		Usage *anthropicUsage `json:"usage"`
	} `json:"message"`
	ContentBlock *anthropicBlock `json:"content_block"`
	Delta        *anthropicBlock `json:"delta"`
	Usage        *anthropicUsage `json:"usage"`
	Error        json.RawMessage `json:"error"`
}

var errNoType = errors.New("no type")

// stringAt reports whether the JSON value at data[i] is the string lit,
// written without escapes (i < 0: no value).
func stringAt(data []byte, i int, lit string) bool {
	end := i + 1 + len(lit)
	return i >= 0 && end < len(data) && data[i] == '"' && string(data[i+1:end]) == lit && data[end] == '"'
}

func (d anthropicDialect) parseFull(data []byte, c *chunkInfo) error {
	var ev anthropicEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return malformed(d.name(), data, err)
	}
	if msg := anthropicErrorMessage(ev.Error); msg != "" {
		c.serverErr = msg
		return nil
	}
	switch ev.Type {
	case "":
		return malformed(d.name(), data, errNoType)
	case anthError:
		c.serverErr = "error event without a message"
	case anthMessageStart:
		if ev.Message != nil && ev.Message.Usage != nil {
			ev.Message.Usage.fill(c, false)
		}
	case anthBlockStart:
		if b := ev.ContentBlock; b != nil {
			blockTokens(b, c)
		}
	case anthBlockDelta:
		if b := ev.Delta; b != nil {
			deltaTokens(b, c)
		}
	case anthMessageDelta:
		if ev.Usage != nil {
			ev.Usage.fill(c, true)
		}
	case anthMessageStop:
		c.end = true
	}
	// ping, content_block_stop and event types added later carry nothing.
	return nil
}

// blockTokens counts what a block's start carries: an opening text or
// thinking (servers send it empty, the deltas follow), or a redacted
// thinking block, which arrives whole: thinking the server did, counted as
// one reasoning chunk. A tool_use block's input is no token.
func blockTokens(b *anthropicBlock, c *chunkInfo) {
	switch b.Type {
	case "text":
		countString(b.Text, false, c)
	case "thinking":
		countString(b.Thinking, true, c)
	case anthRedactedThinking:
		c.tokens, c.reasoning = 1, true
	}
}

// deltaTokens counts a content delta: text_delta is answer, thinking_delta
// reasoning; signature, tool input and citation deltas carry no token.
func deltaTokens(b *anthropicBlock, c *chunkInfo) {
	switch b.Type {
	case anthTextDelta:
		countString(b.Text, false, c)
	case anthThinkingDelta:
		countString(b.Thinking, true, c)
	}
}

// countString makes a non-empty s one chunk of tokens.
func countString(s *string, reasoning bool, c *chunkInfo) {
	if s == nil || *s == "" {
		return
	}
	c.tokens = 1
	c.reasoning = reasoning
	c.replacements, c.text = countRunesFFFD(*s), *s
}

// fill reports the usage: the prompt is the fresh, cache-read and
// cache-written tokens together (OpenAI's prompt_tokens), of which the
// cache-read ones were not computed. message_start's output_tokens is a
// placeholder (0 or 1), so only message_delta's (output) counts.
func (u *anthropicUsage) fill(c *chunkInfo, output bool) {
	prompt := u.InputTokens + u.CacheReadTokens + u.CacheCreationTokens
	if prompt <= 0 && !output {
		return
	}
	c.usage = true
	c.promptTokens = prompt
	c.cachedTokens = u.CacheReadTokens
	if output {
		c.outputTokens = u.OutputTokens
	}
}

// anthropicErrorMessage reads the Messages API's error object, {"type":
// "overloaded_error", "message": "Overloaded"}, as "overloaded_error:
// Overloaded"; other shapes as errorMessage does.
func anthropicErrorMessage(raw json.RawMessage) string {
	var obj struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Type != "" && obj.Message != "" {
		return obj.Type + ": " + obj.Message
	}
	return errorMessage(raw)
}

// anthropicHeader returns the headers a Messages API client sends: extra,
// the key as x-api-key (Anthropic's credential header, in place of
// Authorization: Bearer) and anthropic-version unless extra names one.
func anthropicHeader(apiKey string, extra http.Header) (http.Header, error) {
	h, err := AuthHeader("", extra)
	if err != nil {
		return nil, err
	}
	if apiKey != "" {
		if err := CheckHeader(headerAnthropicKey, apiKey); err != nil {
			return nil, errors.New("the API key holds a control character; it is not shown")
		}
		h.Set(headerAnthropicKey, apiKey)
	}
	if h.Get(headerAnthropicVersion) == "" {
		h.Set(headerAnthropicVersion, anthropicVersion)
	}
	return h, nil
}

// clientHeader returns the headers every request of dialect d carries.
func clientHeader(d dialect, apiKey string, extra http.Header) (http.Header, error) {
	if _, ok := d.(anthropicDialect); ok {
		return anthropicHeader(apiKey, extra)
	}
	return AuthHeader(apiKey, extra)
}

// statusOverloaded is Anthropic's 529 Overloaded: the API is busy, retry
// later (it sends Retry-After with it, as with a 429).
const statusOverloaded = 529
