package sim

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// request is one generation request as it moves through the stack. Each group
// of fields has one writer; the hand-offs between goroutines (a channel, the
// loop's queue, the engine's lock) order the writes before the reads.
type request struct {
	// Set by the handler before the request is tokenized; read-only after.
	id        string
	seq       uint64 // server-wide sequence number, seeds the generated text
	gen       *generation
	fault     Fault
	wantTruth bool
	// background: sent by the simulator itself (Config.Background).
	background bool
	arrival    time.Time
	// proxyStart is when the simulator's proxy took the request
	// (ProxyStartHeader); zero without it.
	proxyStart time.Time
	created    int64 // unix seconds, the "created" field of every chunk
	traceCtx   context.Context
	w          http.ResponseWriter
	rc         *http.ResponseController
	conn       *serverConn // nil unless Serve wraps connections (see conn.go)

	// Set by the handler (and the tokenize job it waits for) before the
	// request reaches the engine.
	promptTokens int
	blockHashes  []uint64  // the prompt's blocks, for the prefix cache
	target       int       // tokens to generate
	finishReason string    // "length" or "stop" once target is reached
	stallAt      int       // pause the sequence after this many tokens (0: never)
	bodyRead     time.Time // the handler finished reading the body
	parseStart   time.Time // the loop started parsing it
	httpEnd      time.Time
	tokSubmit    time.Time // handed to the loop (or the tokenizer pool)
	tokStart     time.Time
	tokEnd       time.Time
	tokOnLoop    bool      // tokenized on the shared loop, blocking it (no tokenizer pool)
	faultStart   time.Time // slow-headers delay
	faultEnd     time.Time

	// Written by the engine under its lock.
	eng engineTimes

	// A stream's headers: sent by the handler before the request reaches the
	// engine (HeadersAtOnce), else by the loop.
	headersSent bool
	headersAt   time.Time // flushed
	// proxyHeadersAt is when that proxy received the response's headers;
	// zero if it did not say (yet). Set on the loop, for the truth.
	proxyHeadersAt time.Time

	// aborted tells the engine to drop the sequence (client gone, reset).
	aborted atomic.Bool
	// goneAt is when the handler saw its client go (Unix ns; 0: never),
	// for the slot-release truth.
	goneAt atomic.Int64

	// Owned by the front-end loop.
	fe frontState
	// done is closed by the loop once the request is finalized.
	done chan struct{}
}

// engineTimes are the engine-core timestamps vLLM keeps per request.
type engineTimes struct {
	queued     time.Time // added to the scheduler's waiting queue
	scheduled  time.Time // given a batch slot (start of its first step)
	prefillEnd time.Time // end of the step that finished its prompt
	firstToken time.Time // end of its first decode step
	lastToken  time.Time

	// In a disaggregated deployment (Config.Disagg) queued, scheduled and
	// prefillEnd are the prefill pool's; these are the rest.
	disagg          bool
	kvDone          time.Time // the link delivered its KV cache
	decodeQueued    time.Time // handed to a decode worker
	decodeScheduled time.Time // the decode worker gave it a batch slot

	cachedTokens int           // prompt tokens found in the prefix cache
	prefillSteps []PrefillStep // the steps that computed its prompt
}

// frontState is what the front-end loop knows about a request.
type frontState struct {
	finished      bool // finalized; later token events are ignored
	tokens        int  // tokens received from the engine
	frames        int  // content frames written (streaming)
	tokenTimes    []time.Time
	firstPick     time.Time // the loop picked up the first token
	firstDetokEnd time.Time
	firstFlush    time.Time // first content frame flushed
	lastPick      time.Time
	lastDetokEnd  time.Time
	lastFlush     time.Time
	detokTotal    time.Duration
	framingTotal  time.Duration
	text          strings.Builder // non-streaming answer
	finishReason  string
	truth         Truth
	reset         bool // the connection was reset on purpose
	hijackFailed  bool // ... but could not be hijacked; the handler aborts instead
	writeErr      error
	// detached: the client went away but the server keeps generating
	// (Config.KeepAbandoned); nothing more is written to it.
	detached bool
	held     []HeldFrame    // content frames the Nagle emulation held back
	details  *tokensDetails // a non-streaming answer's prompt_tokens_details
}

// tokenEvent is one generated token on its way from the engine to the loop.
type tokenEvent struct {
	req   *request
	index int       // 0-based output token index
	at    time.Time // engine timestamp (end of the step)
	last  bool
}
