package sim

import (
	"slices"
	"time"
)

// TruthHeader asks for the ground truth: a request carrying it with value 1
// gets a latscope_truth field in its last chunk before [DONE] (or in the body
// of a non-streaming response).
const TruthHeader = "X-Latscope-Truth"

// Truth is the true duration of every server stage of one request, in
// microseconds, measured around what actually happened.
//
// The first-token stages run back to back from the request's arrival (the
// handler's first instruction) to the flush of its first content frame, in
// this order: http (reading the body), loop_wait (for the shared loop),
// http (parsing and validating, on the loop), loop_wait (for a tokenizer-pool
// worker, if any), tokenize, fault_delay, queue (disaggregated:
// prefill_queue), prefill, (disaggregated: kv_transfer, decode_queue),
// first_decode, loop_wait (for the loop to pick up the first token), detokenize, framing. Hand-offs between
// goroutines fall in other_us, as does the wait for the engine's running
// step to end before the scheduler takes the request (vLLM's input queue,
// not its scheduler queue), so the stages plus other_us add up exactly to
// arrival_to_first_frame_us. For a non-streaming request the "first frame" is
// the first token's detokenization (framing_us is 0).
type Truth struct {
	RequestID    string `json:"request_id"`
	PromptTokens int    `json:"prompt_tokens"`
	CachedTokens int    `json:"cached_tokens"` // prompt tokens the prefix cache spared from prefill
	OutputTokens int    `json:"output_tokens"`
	// FinishReason is "length", "stop", "abort" or "error" (the error-after
	// fault).
	FinishReason string `json:"finish_reason"`
	Stream       bool   `json:"stream"`
	// ClientGone: the client went away before the end, and the server kept
	// generating for it (Config.KeepAbandoned).
	ClientGone bool `json:"client_gone"`
	// ArrivalUnixUs is the request's arrival in Unix microseconds: the other
	// durations count from it, and it places them on a client's clock.
	ArrivalUnixUs int64 `json:"arrival_unix_us"`
	// ProxyUs is the simulator's proxy's part of the wait for the headers:
	// from the proxy taking the request to the server's handler (its
	// accept, parsing, upstream connection and forwarding), plus the
	// headers' way back from the server's flush to the proxy; 0 without the
	// proxy. It is not among the stages below, which count from the
	// arrival.
	ProxyUs int64 `json:"proxy_us,omitempty"`
	// HeadersUs is arrival → a stream's response headers flushed (see
	// Config.Headers); 0 for a non-streaming response.
	HeadersUs int64 `json:"headers_us"`

	HTTPUs int64 `json:"http_us"` // reading, parsing and validating the request
	// LoopWaitUs is time spent waiting for the front end: for the shared loop
	// to parse the request, for a tokenizer-pool worker, and for the shared
	// loop to pick up the first token.
	LoopWaitUs   int64 `json:"loop_wait_us"`
	TokenizeUs   int64 `json:"tokenize_us"`
	FaultDelayUs int64 `json:"fault_delay_us"` // injected slow-headers delay
	QueueUs      int64 `json:"queue_us"`       // in the scheduler's queue: waiting for a batch slot
	PrefillUs    int64 `json:"prefill_us"`     // scheduled → end of the step that finished the prompt
	// With disaggregated prefill and decode (Config.Disagg, Disagg set):
	// the prefill queue (waiting for a prefill worker; QueueUs is then 0),
	// the KV cache's transfer from the prefill worker to the decode worker
	// (the link's time; a late hand-off to the decode worker is in
	// OtherUs), and the decode queue (waiting for a batch slot on the
	// decode worker, the end of its running step included). PrefillUs is the prefill
	// worker's and FirstDecodeUs the decode worker's, from its slot.
	Disagg         bool  `json:"disagg,omitempty"`
	PrefillQueueUs int64 `json:"prefill_queue_us,omitempty"`
	KVTransferUs   int64 `json:"kv_transfer_us,omitempty"`
	DecodeQueueUs  int64 `json:"decode_queue_us,omitempty"`
	FirstDecodeUs  int64 `json:"first_decode_us"`
	DetokenizeUs   int64 `json:"detokenize_us"` // first token
	FramingUs      int64 `json:"framing_us"`    // first frame: SSE framing, write and flush
	OtherUs        int64 `json:"other_us"`
	// ArrivalToFirstFrameUs is the sum of the stages above.
	ArrivalToFirstFrameUs int64 `json:"arrival_to_first_frame_us"`

	// DecodeGapsUs are the engine-time gaps between consecutive output tokens
	// (one fewer than the tokens).
	DecodeGapsUs      []int64 `json:"decode_gaps_us"`
	DecodeUs          int64   `json:"decode_us"`           // first → last token, engine time
	DetokenizeTotalUs int64   `json:"detokenize_total_us"` // all tokens
	FramingTotalUs    int64   `json:"framing_total_us"`    // all content frames
	E2EUs             int64   `json:"e2e_us"`              // arrival → last content frame flushed

	// PrefillSteps are the engine steps that computed the prompt, in order:
	// one per chunk with chunked prefill, a single one without.
	PrefillSteps []PrefillStep `json:"prefill_steps"`
	// HeldFrames are the content frames the Nagle emulation held back
	// (Config.Nagle); absent when none was.
	HeldFrames []HeldFrame `json:"held_frames,omitempty"`
	// LoopBlocked is the stretch this request's tokenization held the
	// shared event loop (no tokenizer pool): no stream's frame could be
	// flushed in it. Absent when it tokenized on a pool worker. Every
	// request's truth together lists every interval the loop was blocked
	// by tokenization.
	LoopBlocked *WallInterval `json:"loop_blocked,omitempty"`
}

// WallInterval is a stretch of the wall clock, so it can be set against
// what a client saw.
type WallInterval struct {
	StartUnixUs int64 `json:"start_unix_us"`
	EndUnixUs   int64 `json:"end_unix_us"`
}

// PrefillStep is one engine step that computed part of a request's prompt,
// on the wall clock, so it can be set against what a client saw.
type PrefillStep struct {
	StartUnixUs int64 `json:"start_unix_us"`
	EndUnixUs   int64 `json:"end_unix_us"`
	Tokens      int   `json:"tokens"` // this request's prompt tokens computed in the step
	// DecodeSeqs is how many sequences decoded a token in the same step; 0
	// means every decoding stream waited for the whole step.
	DecodeSeqs int `json:"decode_seqs"`
}

// HeldFrame is a content frame that the Nagle emulation held back after the
// server wrote it.
type HeldFrame struct {
	Index  int   `json:"index"`   // 0-based content frame index, as in FrameInfo
	HeldUs int64 `json:"held_us"` // from the server's write to its release
}

// Stages returns the first-token stages in order, keyed by their JSON names
// without the _us suffix, including "other". A disaggregated truth has
// prefill_queue, kv_transfer and decode_queue in place of queue.
func (t Truth) Stages() []TruthStage {
	out := []TruthStage{{"http", t.HTTPUs}, {"loop_wait", t.LoopWaitUs}, {"tokenize", t.TokenizeUs}, {"fault_delay", t.FaultDelayUs}}
	if t.Disagg {
		out = append(out, TruthStage{"prefill_queue", t.PrefillQueueUs}, TruthStage{"prefill", t.PrefillUs},
			TruthStage{"kv_transfer", t.KVTransferUs}, TruthStage{"decode_queue", t.DecodeQueueUs})
	} else {
		out = append(out, TruthStage{"queue", t.QueueUs}, TruthStage{"prefill", t.PrefillUs})
	}
	return append(out, TruthStage{"first_decode", t.FirstDecodeUs}, TruthStage{"detokenize", t.DetokenizeUs},
		TruthStage{"framing", t.FramingUs}, TruthStage{"other", t.OtherUs})
}

// TruthStage is one named stage of a Truth.
type TruthStage struct {
	Name string
	Us   int64
}

// buildTruth computes r's truth. Every stage is the difference of two
// timestamps truncated to whole microseconds since arrival, so stages that do
// not overlap can never sum past the total and other_us is never negative.
func buildTruth(r *request, et engineTimes) Truth {
	fe := &r.fe
	c := sinceArrival(r.arrival)
	t := Truth{
		RequestID:     r.id,
		PromptTokens:  r.promptTokens,
		CachedTokens:  et.cachedTokens,
		OutputTokens:  fe.tokens,
		FinishReason:  fe.finishReason,
		Stream:        r.gen.stream,
		ClientGone:    fe.detached,
		ArrivalUnixUs: r.arrival.UnixMicro(),
		PrefillSteps:  et.prefillSteps,
		HeldFrames:    slices.Clone(fe.held),
		ProxyUs:       proxyUs(r),
	}
	if r.gen.stream {
		t.HeadersUs = c.span(r.arrival, r.headersAt)
	}
	if r.tokOnLoop && !r.tokStart.IsZero() && r.tokEnd.After(r.tokStart) {
		t.LoopBlocked = &WallInterval{StartUnixUs: r.tokStart.UnixMicro(), EndUnixUs: r.tokEnd.UnixMicro()}
	}
	firstFrame, lastFrame := fe.firstFlush, fe.lastFlush
	if !r.gen.stream {
		firstFrame, lastFrame = fe.firstDetokEnd, fe.lastDetokEnd
	}
	if !firstFrame.IsZero() {
		t.firstFrameStages(r, et, c.at(firstFrame))
	}
	for i := 1; i < len(fe.tokenTimes); i++ {
		t.DecodeGapsUs = append(t.DecodeGapsUs, c.span(fe.tokenTimes[i-1], fe.tokenTimes[i]))
	}
	if n := len(fe.tokenTimes); n > 0 {
		t.DecodeUs = c.span(fe.tokenTimes[0], fe.tokenTimes[n-1])
	}
	t.DetokenizeTotalUs = fe.detokTotal.Microseconds()
	t.FramingTotalUs = fe.framingTotal.Microseconds()
	if !lastFrame.IsZero() {
		t.E2EUs = c.at(lastFrame)
	}
	return t
}

// sinceArrival measures a request's timestamps in whole microseconds since
// its arrival.
type sinceArrival time.Time

// at is t's offset from arrival.
func (c sinceArrival) at(t time.Time) int64 { return t.Sub(time.Time(c)).Microseconds() }

// span is the time from a to b, 0 when either is unset or b comes first.
func (c sinceArrival) span(a, b time.Time) int64 {
	if a.IsZero() || b.IsZero() || b.Before(a) {
		return 0
	}
	return c.at(b) - c.at(a)
}

// firstFrameStages splits the time from arrival to the first frame,
// firstFrameUs, into its stages; other_us is what none of them covers.
func (t *Truth) firstFrameStages(r *request, et engineTimes, firstFrameUs int64) {
	fe := &r.fe
	c := sinceArrival(r.arrival)
	t.HTTPUs = c.span(r.arrival, r.bodyRead) + c.span(r.parseStart, r.httpEnd)
	t.LoopWaitUs = c.span(r.bodyRead, r.parseStart) + c.span(r.tokSubmit, r.tokStart) + c.span(et.firstToken, fe.firstPick)
	t.TokenizeUs = c.span(r.tokStart, r.tokEnd)
	t.FaultDelayUs = c.span(r.faultStart, r.faultEnd)
	if et.disagg {
		t.Disagg = true
		t.PrefillQueueUs = c.span(et.queued, et.scheduled)
		t.PrefillUs = c.span(et.scheduled, et.prefillEnd)
		t.KVTransferUs = c.span(et.prefillEnd, et.kvDone)
		t.DecodeQueueUs = c.span(et.decodeQueued, et.decodeScheduled)
		t.FirstDecodeUs = c.span(et.decodeScheduled, et.firstToken)
	} else {
		t.QueueUs = c.span(et.queued, et.scheduled)
		t.PrefillUs = c.span(et.scheduled, et.prefillEnd)
		t.FirstDecodeUs = c.span(et.prefillEnd, et.firstToken)
	}
	t.DetokenizeUs = c.span(fe.firstPick, fe.firstDetokEnd)
	if r.gen.stream {
		t.FramingUs = c.span(fe.firstDetokEnd, fe.firstFlush)
	}
	t.ArrivalToFirstFrameUs = firstFrameUs
	var sum int64
	for _, s := range t.Stages() {
		sum += s.Us
	}
	t.OtherUs = t.ArrivalToFirstFrameUs - sum
}

// proxyUs is the time r spent in a proxy in front of the server, as far as
// the proxy said: the forward leg, and the headers' way back where it said
// when it had them.
func proxyUs(r *request) int64 {
	d := r.arrival.Sub(r.proxyStart)
	if r.proxyStart.IsZero() || d < 0 || d >= maxProxyPart {
		return 0
	}
	us := d.Microseconds()
	if back := r.proxyHeadersAt.Sub(r.headersAt); !r.proxyHeadersAt.IsZero() && !r.headersAt.IsZero() && back >= 0 && back < maxProxyPart {
		us += back.Microseconds()
	}
	return us
}

// truthOf is buildTruth with what the proxy in front said of r.
func (s *Server) truthOf(r *request, et engineTimes) Truth {
	if at, ok := s.proxyReceipts.take(r.id); ok {
		r.proxyHeadersAt = at
	}
	return buildTruth(r, et)
}
