package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// The Anthropic Messages API (POST /v1/messages), as vLLM serves it beside
// its OpenAI routes: the same engine, costs and truth, in the Messages
// API's request, events and errors.

// MessagesPath is the Messages API's route.
const MessagesPath = "/v1/messages"

// messagesRequest is the part of a Messages API request the simulator
// reads. thinking is accepted and checked, but whether the model thinks is
// the server's (Config.Reasoning), as with vLLM serving a reasoning model.
type messagesRequest struct {
	Model       string          `json:"model"`
	MaxTokens   *int            `json:"max_tokens"`
	Messages    []chatMessage   `json:"messages"`
	System      json.RawMessage `json:"system"`
	Stream      bool            `json:"stream"`
	Temperature *float64        `json:"temperature"`
	TopP        *float64        `json:"top_p"`
	Thinking    *struct {
		Type         string `json:"type"`
		BudgetTokens int    `json:"budget_tokens"`
	} `json:"thinking"`
}

// parseMessages validates a /v1/messages request. model and max_tokens are
// required, as the API has them; the system prompt, a string or text
// blocks, comes first. The API has no min_tokens or ignore_eos, so a
// client cannot fix the output length: the simulator generates max_tokens
// exactly (stop_reason max_tokens), so runs in this dialect compare with
// the chat dialect's.
func parseMessages(body []byte) (*generation, *apiError) {
	var req messagesRequest
	if e := decodeJSON(body, &req); e != nil {
		return nil, e
	}
	switch {
	case req.Model == "":
		return nil, badRequest("model", "model: field required")
	case req.MaxTokens == nil:
		return nil, badRequest("max_tokens", "max_tokens: field required")
	case len(req.Messages) == 0:
		return nil, badRequest("messages", "messages: at least one message is required")
	}
	if t := req.Thinking; t != nil && t.Type != "enabled" && t.Type != "disabled" {
		return nil, badRequest("thinking", "thinking.type: want enabled or disabled, got %q", t.Type)
	}
	msgs, e := messagesPrompt(req.System, req.Messages)
	if e != nil {
		return nil, e
	}
	g := &generation{chat: true, anthropic: true, messages: msgs}
	f := samplingFields{Model: req.Model, Stream: req.Stream, Temperature: req.Temperature, TopP: req.TopP}
	if e := g.sampling(f, req.MaxTokens); e != nil {
		return nil, e
	}
	g.includeUsage = true
	g.ignoreEOS = true
	return g, nil
}

// messagesPrompt is the chat prompt of a system prompt and messages whose
// roles are user or assistant.
func messagesPrompt(system json.RawMessage, in []chatMessage) ([]message, *apiError) {
	msgs := make([]message, 0, len(in)+1)
	if len(system) > 0 && string(system) != "null" {
		text, err := messageText(system)
		if err != nil {
			return nil, badRequest("system", "system: %v", err)
		}
		msgs = append(msgs, message{Role: "system", Text: text})
	}
	for i, m := range in {
		if m.Role != "user" && m.Role != "assistant" {
			return nil, badRequest(fmt.Sprintf("messages[%d].role", i), "messages[%d].role: want user or assistant, got %q", i, m.Role)
		}
		text, err := messageText(m.Content)
		if err != nil {
			return nil, badRequest(fmt.Sprintf("messages[%d].content", i), "messages[%d].content: %v", i, err)
		}
		msgs = append(msgs, message{Role: m.Role, Text: text})
	}
	return msgs, nil
}

// The Messages API's stream events.
const (
	evMessageStart = "message_start"
	evBlockStart   = "content_block_start"
	evBlockDelta   = "content_block_delta"
	evBlockStop    = "content_block_stop"
	evMessageDelta = "message_delta"
	evMessageStop  = "message_stop"
	evPing         = "ping"
	evError        = "error"
)

// messagesPingEvery is how often a ping goes out, in output tokens, besides
// the one after message_start: Anthropic pings now and then in long streams.
const messagesPingEvery = 32

// messagesUsage is the Messages API's usage: input_tokens counts the prompt
// tokens computed afresh; those read from the prefix cache are apart.
type messagesUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

// messageObject is the message message_start opens and a non-streaming
// answer returns.
type messageObject struct {
	ID           string        `json:"id"`
	Type         string        `json:"type"`
	Role         string        `json:"role"`
	Content      []any         `json:"content"`
	Model        string        `json:"model"`
	StopReason   *string       `json:"stop_reason"`
	StopSequence *string       `json:"stop_sequence"`
	Usage        messagesUsage `json:"usage"`
}

// messagesBlock is a content block as content_block_start opens it.
type messagesBlock struct {
	Type      string  `json:"type"`
	Text      *string `json:"text,omitempty"`
	Thinking  *string `json:"thinking,omitempty"`
	Signature *string `json:"signature,omitempty"`
}

// messagesDelta is the delta of content_block_delta.
type messagesDelta struct {
	Type      string  `json:"type"`
	Text      *string `json:"text,omitempty"`
	Thinking  *string `json:"thinking,omitempty"`
	Signature *string `json:"signature,omitempty"`
}

// messagesEvent is one stream event; each type fills its own fields.
type messagesEvent struct {
	Type         string         `json:"type"`
	Message      *messageObject `json:"message,omitempty"`
	Index        *int           `json:"index,omitempty"`
	ContentBlock *messagesBlock `json:"content_block,omitempty"`
	Delta        any            `json:"delta,omitempty"`
	Usage        *messagesUsage `json:"usage,omitempty"`
	Error        *messagesError `json:"error,omitempty"`
	Truth        *Truth         `json:"latscope_truth,omitempty"`
	Padding      string         `json:"latscope_padding,omitempty"`
}

// messagesError is the Messages API's error object.
type messagesError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// messagesUsageOf is the usage after the tokens generated so far; cached
// is the prompt tokens the prefix cache held.
func (r *request) messagesUsageOf(cached int) messagesUsage {
	return messagesUsage{InputTokens: r.promptTokens - cached, CacheReadInputTokens: cached, OutputTokens: r.fe.tokens}
}

// messagesBlockIndex is the content block of output token i: the thinking
// block is 0 and the text block after it 1; without thinking, text is 0.
func (r *request) messagesBlockIndex(i int) int {
	if r.gen.reasoning.Tokens > 0 && !r.gen.reasoning.thinks(i) {
		return 1
	}
	return 0
}

// appendBlockStart opens output token i's content block.
func (r *request) appendBlockStart(buf []byte, i int) ([]byte, error) {
	empty := ""
	b := &messagesBlock{Type: "text", Text: &empty}
	if r.gen.reasoning.thinks(i) {
		b = &messagesBlock{Type: "thinking", Thinking: &empty, Signature: &empty}
	}
	idx := r.messagesBlockIndex(i)
	return appendSSE(buf, evBlockStart, messagesEvent{Type: evBlockStart, Index: &idx, ContentBlock: b}, "")
}

// appendBlockStop closes the block that holds output token i; a thinking
// block gets its signature first.
func (r *request) appendBlockStop(buf []byte, i int) ([]byte, error) {
	idx := r.messagesBlockIndex(i)
	var err error
	if r.gen.reasoning.thinks(i) {
		sig := "sim-signature-" + r.id
		ev := messagesEvent{Type: evBlockDelta, Index: &idx, Delta: messagesDelta{Type: "signature_delta", Signature: &sig}}
		if buf, err = appendSSE(buf, evBlockDelta, ev, ""); err != nil {
			return buf, err
		}
	}
	return appendSSE(buf, evBlockStop, messagesEvent{Type: evBlockStop, Index: &idx}, "")
}

// appendMessagesDelta appends the events that carry output token i: the
// first is preceded by message_start (with the prompt's usage), a ping and
// its block's start, the first answer token by the thinking block's end
// and the text block's start; a ping comes every messagesPingEvery tokens.
func (r *request) appendMessagesDelta(buf []byte, i int, text, raw string, pad bool) ([]byte, error) {
	var err error
	switch {
	case i == 0:
		buf, err = r.appendMessageStart(buf)
		if err == nil {
			buf, err = r.appendBlockStart(buf, i)
		}
	case r.gen.reasoning.Tokens > 0 && i == r.gen.reasoning.Tokens:
		buf, err = r.appendBlockStop(buf, i-1)
		if err == nil {
			buf, err = r.appendBlockStart(buf, i)
		}
	case i%messagesPingEvery == 0:
		buf, err = appendSSE(buf, evPing, messagesEvent{Type: evPing}, "")
	}
	if err != nil {
		return buf, err
	}
	idx := r.messagesBlockIndex(i)
	d := messagesDelta{Type: "text_delta", Text: &text}
	if r.gen.reasoning.thinks(i) {
		d = messagesDelta{Type: "thinking_delta", Thinking: &text}
	}
	ev := messagesEvent{Type: evBlockDelta, Index: &idx, Delta: d}
	if pad {
		ev.Padding = padding(oversizedPadding)
	}
	return appendSSE(buf, evBlockDelta, ev, raw)
}

// appendMessageStart opens the stream: message_start and a ping. The
// prompt's cached tokens are known by now: the engine wrote them when it
// scheduled the request, before its first token reached the loop.
func (r *request) appendMessageStart(buf []byte) ([]byte, error) {
	m := r.messageObject()
	m.Usage = r.messagesUsageOf(r.eng.cachedTokens)
	m.Usage.OutputTokens = 0
	buf, err := appendSSE(buf, evMessageStart, messagesEvent{Type: evMessageStart, Message: &m}, "")
	if err != nil {
		return buf, err
	}
	return appendSSE(buf, evPing, messagesEvent{Type: evPing}, "")
}

func (r *request) messageObject() messageObject {
	return messageObject{ID: "msg_" + r.id, Type: "message", Role: "assistant", Content: []any{}, Model: r.gen.model}
}

// messagesStopReason is the stop_reason of the request's finish reason.
func (r *request) messagesStopReason() string {
	if r.finishReason == "length" {
		return "max_tokens"
	}
	return "end_turn"
}

// appendMessagesEnd ends a complete stream: the last block's end,
// message_delta with the stop reason and usage, message_stop (with the
// truth, if asked for).
func (r *request) appendMessagesEnd(buf []byte, details *tokensDetails, truth *Truth) ([]byte, error) {
	var err error
	if r.fe.tokens > 0 {
		if buf, err = r.appendBlockStop(buf, r.fe.tokens-1); err != nil {
			return buf, err
		}
	}
	cached := 0
	if details != nil {
		cached = details.CachedTokens
	}
	u := r.messagesUsageOf(cached)
	reason := r.messagesStopReason()
	ev := messagesEvent{Type: evMessageDelta, Delta: map[string]any{"stop_reason": reason, "stop_sequence": nil}, Usage: &u}
	if buf, err = appendSSE(buf, evMessageDelta, ev, ""); err != nil {
		return buf, err
	}
	return appendSSE(buf, evMessageStop, messagesEvent{Type: evMessageStop, Truth: truth}, "")
}

// messagesErrorEvent is the error event that ends a stream whose
// generation failed (the error-after fault), as Anthropic sends one; the
// stream has no other end.
func (r *request) messagesErrorEvent(truth *Truth) ([]byte, error) {
	e := generationError()
	ev := messagesEvent{Type: evError, Error: &messagesError{Type: messagesErrorType(e.Status), Message: e.Message}, Truth: truth}
	return appendSSE(nil, evError, ev, "")
}

// messagesMalformedEvent is a content delta cut off in the middle of its JSON.
func messagesMalformedEvent() []byte {
	return []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" bro\n\n")
}

// messagesBody is a non-streaming answer: the message with the text as one
// block.
func (r *request) messagesBody(truth *Truth) ([]byte, error) {
	m := r.messageObject()
	reason := r.messagesStopReason()
	m.StopReason = &reason
	text := r.fe.text.String()
	m.Content = []any{messagesBlock{Type: "text", Text: &text}}
	cached := 0
	if r.fe.details != nil {
		cached = r.fe.details.CachedTokens
	}
	m.Usage = r.messagesUsageOf(cached)
	b, err := json.Marshal(struct {
		messageObject
		Truth *Truth `json:"latscope_truth,omitempty"`
	}{m, truth})
	if err != nil {
		return nil, fmt.Errorf("encode message: %w", err)
	}
	return b, nil
}

// messagesErrorType is the Messages API's error type for an HTTP status.
func messagesErrorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	case StatusOverloaded:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// StatusOverloaded is Anthropic's 529 Overloaded; the fault status=529
// answers with it.
const StatusOverloaded = 529

// writeMessagesError writes e as the Messages API does:
// {"type":"error","error":{"type":...,"message":...}}.
func writeMessagesError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(messagesEvent{Type: evError, Error: &messagesError{Type: messagesErrorType(e.Status), Message: e.Message}})
}

// writeErrorFor writes e in the shape of the API served at path.
func writeErrorFor(w http.ResponseWriter, path string, e *apiError) {
	if path == MessagesPath {
		writeMessagesError(w, e)
		return
	}
	writeError(w, e)
}
