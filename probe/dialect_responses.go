package probe

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// DialectOpenAIResponses is the OpenAI Responses API: POST /v1/responses
// with stream: true (OpenAI, vLLM, Ollama).
const DialectOpenAIResponses = "openai-responses"

// responsesDialect speaks the Responses API's stream: SSE events whose data
// names its type (response.output_text.delta, response.reasoning_text.delta,
// ...), ending with response.completed, or response.incomplete when
// max_output_tokens cut the answer short, either carrying the usage. There
// is no [DONE].
type responsesDialect struct{}

func (responsesDialect) name() string { return DialectOpenAIResponses }
func (responsesDialect) path() string { return "/v1/responses" }
func (responsesDialect) endMarker() string {
	return "a response.completed (or response.incomplete) event"
}
func (responsesDialect) ndjson() bool    { return false }
func (responsesDialect) asksUsage() bool { return true } // the final response carries it

type responsesRequest struct {
	Model           string `json:"model,omitempty"`
	Input           string `json:"input"`
	Stream          bool   `json:"stream"`
	MaxOutputTokens int    `json:"max_output_tokens,omitempty"`
}

// body asks for max_output_tokens only: the Responses API has no min
// tokens or ignore_eos, and OpenAI refuses unknown parameters.
func (responsesDialect) body(model string, spec RequestSpec) ([]byte, error) {
	return json.Marshal(responsesRequest{Model: model, Input: spec.fullPrompt(), Stream: true, MaxOutputTokens: spec.OutputTokens})
}

// The event types that matter; the others (response.created, .in_progress,
// output_item.added, content_part.done, ...) carry no tokens.
const (
	respOutputText       = "response.output_text.delta"
	respReasoningText    = "response.reasoning_text.delta"
	respReasoningSummary = "response.reasoning_summary_text.delta"
	respCompleted        = "response.completed"
	respIncomplete       = "response.incomplete"
	respFailed           = "response.failed"
	respError            = "error"
)

// parse walks the event's keys for its type and delta: a delta event is
// scanned, not decoded; the final, failed and error events are decoded.
func (d responsesDialect) parse(data []byte, c *chunkInfo) error {
	data = bytes.TrimSpace(data)
	if !jsonObject(data) {
		return malformed(d.name(), data, errNotObject)
	}
	typ, delta := -1, -1
	for i := 0; ; {
		key, v, next := nextKey(data, i)
		if next < 0 {
			break
		}
		i = next
		switch {
		case string(key) == "type":
			if typ < 0 {
				typ = v
			}
		case string(key) == "delta":
			if delta < 0 {
				delta = v
			}
		case string(key) == "error" && data[v] != 'n':
			return d.parseFull(data, c) // vLLM's {"error": {...}} mid-stream
		}
	}
	tv, st := scanAt(data, typ)
	if st != fieldString {
		return malformed(d.name(), data, fmt.Errorf("no type"))
	}
	switch t := data[typ+1 : tv.end-1]; string(t) {
	case respOutputText, respReasoningText, respReasoningSummary:
		v, st := scanAt(data, delta)
		if st == fieldOther || st == fieldAbsent {
			return d.parseFull(data, c)
		}
		if v.nonEmpty {
			c.tokens = 1
			c.reasoning = string(t) != respOutputText
			c.replacements, c.quoted = v.replacements, v.quoted
		}
		return nil
	case respCompleted, respIncomplete, respFailed, respError:
		return d.parseFull(data, c)
	}
	return nil
}

// responsesEvent is the decoded form of the events parse does not scan.
type responsesEvent struct {
	Type     string          `json:"type"`
	Delta    *string         `json:"delta"`
	Message  string          `json:"message"` // type error
	Error    json.RawMessage `json:"error"`
	Response *struct {
		Status string          `json:"status"`
		Error  json.RawMessage `json:"error"`
		Usage  *struct {
			InputTokens        int `json:"input_tokens"`
			InputTokensDetails *struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"input_tokens_details"`
			OutputTokens        int `json:"output_tokens"`
			OutputTokensDetails *struct {
				ReasoningTokens int `json:"reasoning_tokens"`
			} `json:"output_tokens_details"`
		} `json:"usage"`
	} `json:"response"`
}

func (d responsesDialect) parseFull(data []byte, c *chunkInfo) error {
	var ev responsesEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return malformed(d.name(), data, err)
	}
	if msg := errorMessage(ev.Error); msg != "" {
		c.serverErr = msg
		return nil
	}
	switch ev.Type {
	case respError:
		c.serverErr = "error event: " + ev.Message
		return nil
	case respFailed:
		c.serverErr = "response failed"
		if ev.Response != nil {
			if msg := errorMessage(ev.Response.Error); msg != "" {
				c.serverErr += ": " + msg
			}
		}
		return nil
	case respOutputText, respReasoningText, respReasoningSummary:
		if ev.Delta != nil && *ev.Delta != "" {
			c.tokens = 1
			c.reasoning = ev.Type != respOutputText
			c.replacements, c.text = countRunesFFFD(*ev.Delta), *ev.Delta
		}
		return nil
	case respCompleted, respIncomplete:
		c.end = true
	}
	if ev.Response == nil || ev.Response.Usage == nil {
		return nil
	}
	u := ev.Response.Usage
	if u.InputTokens > 0 || u.OutputTokens > 0 {
		c.usage = true
		c.promptTokens = u.InputTokens
		c.outputTokens = u.OutputTokens
		if u.InputTokensDetails != nil {
			c.cachedTokens = u.InputTokensDetails.CachedTokens
		}
		if u.OutputTokensDetails != nil {
			c.reasonTokens = u.OutputTokensDetails.ReasoningTokens
		}
	}
	return nil
}
