package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Reasoning makes the simulator a reasoning model: the first Tokens output
// tokens of a chat or Responses stream are its thinking, then comes the
// answer. They count within the request's max tokens, as a reasoning
// model's do, and in the usage's reasoning_tokens.
type Reasoning struct {
	Tokens int
	// Field is the chat delta field the thinking streams in:
	// ReasoningField (newer vLLM; the default) or ReasoningContentField
	// (older vLLM, SGLang, DeepSeek, llama.cpp). The Responses API sends
	// response.reasoning_text.delta events either way.
	Field string
}

// The chat delta fields reasoning servers stream thinking in.
const (
	ReasoningField        = "reasoning"
	ReasoningContentField = "reasoning_content"
)

// ParseReasoningField checks a reasoning field name; "" is ReasoningField.
func ParseReasoningField(name string) (string, error) {
	switch name {
	case "", ReasoningField:
		return ReasoningField, nil
	case ReasoningContentField:
		return name, nil
	}
	return "", fmt.Errorf("unknown reasoning field %q (known: %s, %s)", name, ReasoningField, ReasoningContentField)
}

// thinks reports whether output token i is reasoning.
func (r Reasoning) thinks(i int) bool { return i < r.Tokens }

// responsesRequest is the part of a Responses API request the simulator
// reads: input is a string or a list of messages.
type responsesRequest struct {
	Model           string          `json:"model"`
	Input           json.RawMessage `json:"input"`
	Stream          bool            `json:"stream"`
	MaxOutputTokens *int            `json:"max_output_tokens"`
	Temperature     *float64        `json:"temperature"`
	TopP            *float64        `json:"top_p"`
}

// parseResponses validates a /v1/responses request. Its prompt is counted
// as a chat prompt; the usage always comes with the stream's last event;
// it never stops early (see below).
func parseResponses(body []byte) (*generation, *apiError) {
	var req responsesRequest
	if e := decodeJSON(body, &req); e != nil {
		return nil, e
	}
	msgs, err := responsesInput(req.Input)
	if err != nil {
		return nil, badRequest("input", "input: %v", err)
	}
	g := &generation{chat: true, responses: true, messages: msgs}
	f := samplingFields{Model: req.Model, Stream: req.Stream, Temperature: req.Temperature, TopP: req.TopP}
	if e := g.sampling(f, req.MaxOutputTokens); e != nil {
		if e.Param == "max_tokens" {
			e.Param = "max_output_tokens"
		}
		return nil, e
	}
	g.includeUsage = true
	// The Responses API has no min_tokens or ignore_eos (OpenAI refuses
	// unknown parameters, so a client cannot send vLLM's), so a client
	// cannot fix the output length: the simulator generates
	// max_output_tokens exactly, so runs in this dialect compare with the
	// chat dialect's.
	g.ignoreEOS = true
	return g, nil
}

// responsesInput accepts a string or a list of {role, content} messages
// whose content is a string or parts of type input_text (or text).
func responsesInput(raw json.RawMessage) ([]message, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New("input is required")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []message{{Role: "user", Text: s}}, nil
	}
	var items []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, errors.New("want a string or a list of messages")
	}
	if len(items) == 0 {
		return nil, errors.New("must not be empty")
	}
	msgs := make([]message, 0, len(items))
	for i, it := range items {
		if it.Role == "" {
			return nil, fmt.Errorf("item %d has no role", i)
		}
		text, err := messageText(bytes.ReplaceAll(it.Content, []byte(`"input_text"`), []byte(`"text"`)))
		if err != nil {
			return nil, fmt.Errorf("item %d: %v", i, err)
		}
		msgs = append(msgs, message{Role: it.Role, Text: text})
	}
	return msgs, nil
}

// The Responses API's stream events used here.
const (
	evResponseCreated    = "response.created"
	evOutputTextDelta    = "response.output_text.delta"
	evReasoningTextDelta = "response.reasoning_text.delta"
	evResponseCompleted  = "response.completed"
	evResponseIncomplete = "response.incomplete" // ended at max_output_tokens
)

// responsesDelta is a text delta event.
type responsesDelta struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	ContentIndex   int    `json:"content_index"`
	Delta          string `json:"delta"`
	Padding        string `json:"latscope_padding,omitempty"`
}

// responsesUsage is the Responses API's usage object.
type responsesUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// responseObject is the response a lifecycle event carries.
type responseObject struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	CreatedAt         int64           `json:"created_at"`
	Status            string          `json:"status"`
	Model             string          `json:"model"`
	Output            []any           `json:"output"`
	Usage             *responsesUsage `json:"usage"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
}

// responsesLifecycle is response.created, .completed or .incomplete.
type responsesLifecycle struct {
	Type           string         `json:"type"`
	SequenceNumber int            `json:"sequence_number"`
	Response       responseObject `json:"response"`
	Truth          *Truth         `json:"latscope_truth,omitempty"`
}

func (r *request) responseObject(status string) responseObject {
	return responseObject{ID: "resp_" + r.id, Object: "response", CreatedAt: r.created, Status: status,
		Model: r.gen.model, Output: []any{}}
}

// appendSSE appends v as one SSE event named name. raw, if not empty,
// replaces the content placeholder byte for byte.
func appendSSE(buf []byte, name string, v any, raw string) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return buf, fmt.Errorf("encode %s event: %w", name, err)
	}
	if raw != "" {
		b = bytes.Replace(b, []byte(rawPlaceholder), []byte(raw), 1)
	}
	buf = append(buf, "event: "...)
	buf = append(buf, name...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, b...)
	return append(buf, "\n\n"...), nil
}

// appendResponsesDelta appends output token i as a Responses delta event,
// after response.created for the first. Sequence numbers follow the token
// index: created is 0, token i is i+1.
func (r *request) appendResponsesDelta(buf []byte, i int, text, raw string, pad bool) ([]byte, error) {
	var err error
	if i == 0 {
		ev := responsesLifecycle{Type: evResponseCreated, Response: r.responseObject("in_progress")}
		if buf, err = appendSSE(buf, ev.Type, ev, ""); err != nil {
			return buf, err
		}
	}
	ev := responsesDelta{Type: evOutputTextDelta, SequenceNumber: i + 1, ItemID: "msg_" + r.id, Delta: text}
	if r.gen.reasoning.thinks(i) {
		ev.Type, ev.ItemID = evReasoningTextDelta, "rs_"+r.id
	} else if r.gen.reasoning.Tokens > 0 {
		ev.OutputIndex = 1 // the reasoning item is output 0
	}
	if pad {
		ev.Padding = padding(oversizedPadding)
	}
	return appendSSE(buf, ev.Type, ev, raw)
}

// appendResponsesEnd appends response.completed, or response.incomplete
// when the length limit ended the answer, with the usage.
func (r *request) appendResponsesEnd(buf []byte, details *tokensDetails, truth *Truth) ([]byte, error) {
	ev := responsesLifecycle{Type: evResponseCompleted, SequenceNumber: r.fe.tokens + 1, Truth: truth}
	ev.Response = r.finalResponse(details)
	if ev.Response.Status == "incomplete" {
		ev.Type = evResponseIncomplete
	}
	return appendSSE(buf, ev.Type, ev, "")
}

// finalResponse is the finished response object, with its usage.
func (r *request) finalResponse(details *tokensDetails) responseObject {
	status := "completed"
	if r.finishReason == "length" && r.gen.maxTokensSet {
		status = "incomplete"
	}
	o := r.responseObject(status)
	if status == "incomplete" {
		o.IncompleteDetails = &struct {
			Reason string `json:"reason"`
		}{"max_output_tokens"}
	}
	u := &responsesUsage{InputTokens: r.promptTokens, OutputTokens: r.fe.tokens, TotalTokens: r.promptTokens + r.fe.tokens}
	if details != nil {
		u.InputTokensDetails.CachedTokens = details.CachedTokens
	}
	u.OutputTokensDetails.ReasoningTokens = r.reasoningTokens()
	o.Usage = u
	return o
}

// responsesBody is a non-streaming Responses API answer: the response
// object with the text as one output message.
func (r *request) responsesBody(truth *Truth) ([]byte, error) {
	o := r.finalResponse(r.fe.details)
	o.Output = []any{map[string]any{
		"type": "message", "id": "msg_" + r.id, "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": r.fe.text.String()}},
	}}
	b, err := json.Marshal(struct {
		responseObject
		Truth *Truth `json:"latscope_truth,omitempty"`
	}{o, truth})
	if err != nil {
		return nil, fmt.Errorf("encode response: %w", err)
	}
	return b, nil
}
