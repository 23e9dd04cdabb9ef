// Package probe is latscope's instrument: it sends synthetic streaming
// requests to an LLM server and times every stage a client can see.
//
// Where each number comes from:
//   - client.go times one request (httptrace for the connection phases, the
//     stream reader for every token) and classifies how it ended;
//   - sse.go and ndjson.go read the two stream formats servers use;
//   - dialect*.go know each server's request body and chunk fields;
//   - load.go, pacer.go and prompt.go decide what to send and when;
//   - stall.go finds pauses shared by many streams (a blocked server loop).
package probe

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/latscope/latscope/event"
)

// RequestSpec is everything the load generator decides about one request.
// The Client turns it into an HTTP request for its dialect.
type RequestSpec struct {
	ID      string // sent as X-Request-Id and recorded
	TraceID string // 32 hex digits, sent in a W3C traceparent header
	SpanID  string // 16 hex digits, the parent span id in traceparent
	Seq     uint64 // 0-based send order within the run
	Worker  int
	Warmup  bool // recorded, kept out of statistics

	Prompt       string // prompt text (chat dialects send it as one user message, after History)
	PromptTokens int    // the prompt's length in the server's tokens, as calibrated (recorded when the server reports no usage)
	OutputTokens int    // exact number of tokens to ask for

	// Intended is when the request should have been sent. In open loop it is
	// the pacer's schedule; latency counts from it (no coordinated omission).
	// Zero means "now".
	Intended time.Time

	// History is the conversation before Prompt, oldest first (user and
	// assistant messages in turn): chat dialects send it as messages
	// before Prompt's, the others as text before it (see fullPrompt).
	// Session and Turn are recorded (event.Request).
	History []Message
	Session string
	Turn    int
	// KeepAnswer asks the Client to keep the answer's text (not the
	// reasoning) for the conversation's next turn.
	KeepAnswer bool

	// AbandonTokens > 0 closes the stream once this many output tokens
	// came; AbandonAfter > 0 closes it this long after Intended (or the
	// start), as a user who pressed stop. The request then ends abandoned.
	AbandonTokens int
	AbandonAfter  time.Duration

	// lag is the run's scheduling-lag watch for this request (nil: none),
	// told of its reads by the probe's own Client.
	lag *lagRequest
}

// Message is one message of a conversation.
type Message struct {
	Role    string // "user" or "assistant"
	Content string
}

// chatMessages is the spec's conversation as a chat request's messages:
// History, then Prompt as the user's.
func (s RequestSpec) chatMessages() []chatMessage {
	out := make([]chatMessage, 0, len(s.History)+1)
	for _, m := range s.History {
		out = append(out, chatMessage(m))
	}
	return append(out, chatMessage{Role: "user", Content: s.Prompt})
}

// fullPrompt is the spec's conversation as one text, for the dialects
// without messages: every message of History, then Prompt, a blank line
// apart, so each turn's text begins with the previous turn's whole.
func (s RequestSpec) fullPrompt() string {
	if len(s.History) == 0 {
		return s.Prompt
	}
	var b strings.Builder
	for _, m := range s.History {
		b.WriteString(m.Content)
		b.WriteString("\n\n")
	}
	b.WriteString(s.Prompt)
	return b.String()
}

// Doer executes one request and returns its record. Implementations never
// return nil and always set exactly one Outcome.
type Doer interface {
	Do(ctx context.Context, spec RequestSpec) *event.Request
}

// abandonRule says which rule abandons the request, as --cancel-after
// writes it.
func (s RequestSpec) abandonRule() string {
	switch {
	case s.AbandonTokens > 0:
		return fmt.Sprintf("tokens=%d", s.AbandonTokens)
	case s.AbandonAfter > 0:
		return "time=" + s.AbandonAfter.String()
	}
	return ""
}
