package probe

import "time"

// MaxTraceTokens is the longest prompt or output a trace request may ask
// for: the bound of every length the probe takes.
const MaxTraceTokens = maxTokenLength

// TraceRequest is one request of a trace.
type TraceRequest struct {
	At           time.Duration // when it is due, from the trace's first request
	PromptTokens int           // 1 to MaxTraceTokens
	OutputTokens int           // 1 to MaxTraceTokens
	// HashIDs name the prompt's blocks of BlockTokens tokens, in order
	// (Mooncake): requests with the same leading ids share that prefix.
	HashIDs []uint64
}

// Trace is a schedule of requests to replay (LoadConfig.Trace), sorted by
// time. The probe only replays it: package tracefile reads one from a
// file, a recording or a published trace.
type Trace struct {
	Format      string // where it came from, for the session's header ("mooncake", "recording", …)
	Requests    []TraceRequest
	BlockTokens int // tokens per hash id; 0 when the trace has none
}

// Duration is when the trace's last request is due.
func (t *Trace) Duration() time.Duration {
	if len(t.Requests) == 0 {
		return 0
	}
	return t.Requests[len(t.Requests)-1].At
}

// ShortestPrompt is the trace's shortest prompt; 0 for no trace.
func (t *Trace) ShortestPrompt() int {
	if t == nil {
		return 0
	}
	n := 0
	for i, r := range t.Requests {
		if i == 0 || r.PromptTokens < n {
			n = r.PromptTokens
		}
	}
	return n
}
