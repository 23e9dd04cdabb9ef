package bench

import (
	"context"
	"time"

	"github.com/latscope/latscope/event"
)

// StreamRequest is what one bench request asks for.
type StreamRequest struct {
	ID           string // sent as X-Request-Id; the simulator's ground truth is keyed by it
	Prompt       string
	PromptTokens int
	OutputTokens int
}

// Trace is what a client saw of one streamed request: when it started and
// when each content frame arrived.
//
// The arrival offsets are kept in the client's own representation (the bare
// client's durations or the probe's chunks) so that adapting the probe's
// record costs no allocation inside the throughput measurement.
type Trace struct {
	// Start is when the client began the request, with a monotonic reading.
	Start time.Time
	// Err is set when the request did not end normally.
	Err error

	offsets []time.Duration
	chunks  []event.Chunk
}

// Frames returns how many content frames arrived.
func (t Trace) Frames() int {
	if t.chunks != nil {
		return len(t.chunks)
	}
	return len(t.offsets)
}

// At returns the arrival offset of content frame i from Start.
func (t Trace) At(i int) time.Duration {
	if t.chunks != nil {
		return t.chunks[i].At
	}
	return t.offsets[i]
}

// Streamer runs one streaming completion and reports what it saw. It is the
// only thing the benches know about a client.
type Streamer interface {
	Stream(ctx context.Context, req StreamRequest) Trace
}

// ClientFactory names a client and builds it for one server.
type ClientFactory struct {
	Name string
	New  func(baseURL string) (Streamer, error)
}
