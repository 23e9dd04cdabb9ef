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

	Prompt       string // prompt text (chat dialects send it as one user message)
	PromptTokens int    // the prompt's length in the server's tokens, as calibrated (recorded when the server reports no usage)
	OutputTokens int    // exact number of tokens to ask for

	// Intended is when the request should have been sent. In open loop it is
	// the pacer's schedule; latency counts from it (no coordinated omission).
	// Zero means "now".
	Intended time.Time

	// lag is the run's scheduling-lag watch for this request (nil: none),
	// told of its reads by the probe's own Client.
	lag *lagRequest
}

// Doer executes one request and returns its record. Implementations never
// return nil and always set exactly one Outcome.
type Doer interface {
	Do(ctx context.Context, spec RequestSpec) *event.Request
}
