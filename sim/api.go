package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// maxBodyBytes bounds a request body; larger bodies get 413.
const maxBodyBytes = 4 << 20

// defaultMaxTokens is used when a request sets no limit (vLLM would allow the
// rest of the context; a simulator is better served by a short answer).
const defaultMaxTokens = 256

// apiError is an OpenAI-style error, sent as {"error": {...}}.
type apiError struct {
	Status  int    `json:"-"`
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   any    `json:"param"`
	Code    int    `json:"code"`
}

func (e *apiError) Error() string { return e.Message }

func badRequest(param, format string, args ...any) *apiError {
	e := &apiError{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...), Type: "invalid_request_error", Code: http.StatusBadRequest}
	if param != "" {
		e.Param = param
	}
	return e
}

func statusError(status int, msg string) *apiError {
	typ := "invalid_request_error"
	switch {
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case status >= 500:
		typ = "server_error"
	}
	return &apiError{Status: status, Message: msg, Type: typ, Code: status}
}

func writeError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(struct {
		Error *apiError `json:"error"`
	}{e})
}

// readBody reads at most maxBodyBytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error",
				Message: fmt.Sprintf("request body larger than %d bytes", maxBodyBytes), Code: http.StatusRequestEntityTooLarge}
		}
		return nil, badRequest("", "read request body: %v", err)
	}
	return body, nil
}

// decodeJSON decodes body into v, turning decoding errors into 400s that name
// the offending field.
func decodeJSON(body []byte, v any) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("", "empty request body: want a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := strings.TrimPrefix(te.Field, "samplingFields.")
			if field == "" {
				return badRequest("", "request body must be a JSON object, got %s", te.Value)
			}
			return badRequest(field, "%s: expected %s, got %s", field, te.Type, te.Value)
		}
		return badRequest("", "invalid JSON: %v", err)
	}
	return nil
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// samplingFields are the request fields both endpoints share.
type samplingFields struct {
	Model         string         `json:"model"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options"`
	MaxTokens     *int           `json:"max_tokens"`
	MinTokens     *int           `json:"min_tokens"`
	IgnoreEOS     bool           `json:"ignore_eos"`
	N             *int           `json:"n"`
	Temperature   *float64       `json:"temperature"`
	TopP          *float64       `json:"top_p"`
}

type chatRequest struct {
	samplingFields
	Messages            []chatMessage `json:"messages"`
	MaxCompletionTokens *int          `json:"max_completion_tokens"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type completionRequest struct {
	samplingFields
	Prompt json.RawMessage `json:"prompt"`
}

type tokenizeRequest struct {
	Model               string          `json:"model"`
	Prompt              json.RawMessage `json:"prompt"`
	Messages            []chatMessage   `json:"messages"`
	AddGenerationPrompt *bool           `json:"add_generation_prompt"`
}

// apiKind is the API a generation request came in on.
type apiKind int

const (
	apiCompletions apiKind = iota // /v1/completions
	apiChat                       // /v1/chat/completions
	apiResponses                  // /v1/responses (chat-shaped prompt, its own events)
	apiMessages                   // /v1/messages (Anthropic's Messages API: chat-shaped prompt, its own events and errors)
)

// generation is a validated request, ready for the front end.
type generation struct {
	chat         bool // a chat prompt (chat completions or Responses)
	responses    bool // the Responses API's request and events
	anthropic    bool // the Messages API's request, events and errors
	reasoning    Reasoning
	model        string
	stream       bool
	includeUsage bool
	messages     []message // chat
	prompt       string    // completions, text prompt
	promptIDs    []int     // completions, token-id prompt
	maxTokens    int
	maxTokensSet bool
	minTokens    int
	ignoreEOS    bool
}

func parseChat(body []byte) (*generation, *apiError) {
	var req chatRequest
	if e := decodeJSON(body, &req); e != nil {
		return nil, e
	}
	if req.Messages == nil {
		return nil, badRequest("messages", "messages is required")
	}
	if len(req.Messages) == 0 {
		return nil, badRequest("messages", "messages must not be empty")
	}
	msgs := make([]message, 0, len(req.Messages))
	for i, m := range req.Messages {
		text, err := messageText(m.Content)
		if err != nil {
			return nil, badRequest(fmt.Sprintf("messages[%d].content", i), "messages[%d].content: %v", i, err)
		}
		if m.Role == "" {
			return nil, badRequest(fmt.Sprintf("messages[%d].role", i), "messages[%d].role is required", i)
		}
		msgs = append(msgs, message{Role: m.Role, Text: text})
	}
	g := &generation{chat: true, messages: msgs}
	maxTokens := req.MaxTokens
	if req.MaxCompletionTokens != nil {
		maxTokens = req.MaxCompletionTokens
	}
	if e := g.sampling(req.samplingFields, maxTokens); e != nil {
		return nil, e
	}
	return g, nil
}

// messageText accepts a string or an array of {"type":"text","text":...} parts.
func messageText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", errors.New("content is required")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("want a string or an array of text parts")
	}
	var buf bytes.Buffer
	for i, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("part %d has type %q; only text is supported", i, p.Type)
		}
		if i > 0 {
			buf.WriteByte('\n')
		}
		buf.WriteString(p.Text)
	}
	return buf.String(), nil
}

func parseCompletion(body []byte) (*generation, *apiError) {
	var req completionRequest
	if e := decodeJSON(body, &req); e != nil {
		return nil, e
	}
	g := &generation{}
	if e := g.setPrompt(req.Prompt); e != nil {
		return nil, e
	}
	if e := g.sampling(req.samplingFields, req.MaxTokens); e != nil {
		return nil, e
	}
	return g, nil
}

// setPrompt accepts a string, a one-element array of strings, or an array of
// token ids.
func (g *generation) setPrompt(raw json.RawMessage) *apiError {
	if len(raw) == 0 || string(raw) == "null" {
		return badRequest("prompt", "prompt is required")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if countText(s) == 0 {
			return badRequest("prompt", "prompt must not be empty")
		}
		g.prompt = s
		return nil
	}
	var ss []string
	if err := json.Unmarshal(raw, &ss); err == nil {
		if len(ss) != 1 {
			return badRequest("prompt", "the simulator takes exactly one prompt, got %d", len(ss))
		}
		return g.setPrompt(json.RawMessage(mustJSON(ss[0])))
	}
	var ids []int
	if err := json.Unmarshal(raw, &ids); err == nil {
		if len(ids) == 0 {
			return badRequest("prompt", "prompt must not be empty")
		}
		g.promptIDs = ids
		return nil
	}
	return badRequest("prompt", "prompt: want a string, an array of one string, or an array of token ids")
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte("null")
	}
	return b
}

// sampling validates the fields both endpoints share.
func (g *generation) sampling(f samplingFields, maxTokens *int) *apiError {
	g.model = f.Model
	g.stream = f.Stream
	g.includeUsage = f.StreamOptions != nil && f.StreamOptions.IncludeUsage
	if f.StreamOptions != nil && !f.Stream {
		return badRequest("stream_options", "stream_options is only allowed when stream is true")
	}
	g.maxTokens = defaultMaxTokens
	if maxTokens != nil {
		if *maxTokens < 1 {
			return badRequest("max_tokens", "max_tokens must be at least 1, got %d", *maxTokens)
		}
		g.maxTokens, g.maxTokensSet = *maxTokens, true
	}
	if f.MinTokens != nil {
		if *f.MinTokens < 0 || *f.MinTokens > g.maxTokens {
			return badRequest("min_tokens", "min_tokens must be between 0 and max_tokens (%d), got %d", g.maxTokens, *f.MinTokens)
		}
		g.minTokens = *f.MinTokens
	}
	if f.N != nil && *f.N != 1 {
		return badRequest("n", "the simulator supports only n=1, got %d", *f.N)
	}
	if f.Temperature != nil && (*f.Temperature < 0 || *f.Temperature > 2) {
		return badRequest("temperature", "temperature must be between 0 and 2")
	}
	if f.TopP != nil && (*f.TopP <= 0 || *f.TopP > 1) {
		return badRequest("top_p", "top_p must be in (0, 1]")
	}
	g.ignoreEOS = f.IgnoreEOS
	return nil
}

// promptTokens counts the prompt with the server's token model.
func (g *generation) promptTokens() int {
	switch {
	case g.chat:
		return countChat(g.messages, true)
	case g.promptIDs != nil:
		return len(g.promptIDs)
	}
	return countText(g.prompt)
}

// promptTokenIDs returns the prompt's token ids; there are promptTokens() of them.
func (g *generation) promptTokenIDs() []int {
	switch {
	case g.chat:
		return chatIDs(g.messages, true)
	case g.promptIDs != nil:
		return g.promptIDs
	}
	return tokenIDs(nil, g.prompt)
}
