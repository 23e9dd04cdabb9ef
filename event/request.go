package event

import (
	"strings"
	"time"
)

// Provenance says where a number came from. latscope never presents an
// estimate as a measurement: every stage carries one of these.
type Provenance string

// The provenances, from most to least direct.
const (
	Measured       Provenance = "measured"  // timed by latscope's own client clock
	ServerReported Provenance = "server"    // reported by the server for this request (or, failing that, for the interval)
	Estimated      Provenance = "estimated" // derived by latscope from other numbers, e.g. the network return from the connect RTT
)

// Stage names one slice of a request's time. The client stages (Request.Stages)
// are contiguous and add up exactly to the client's TTFT; the breakdown stages
// (Request.Breakdown) split that same TTFT by where the time went, with the rest
// named StageUnattributed.
type Stage string

// Client stages, measured by the probe in this order. Each runs from the end of
// the previous one, so together they cover [Intended, first token] without a gap.
const (
	StageSchedLag    Stage = "sched_lag"    // open loop only: the probe started later than intended
	StageSerialize   Stage = "serialize"    // build the prompt and marshal the JSON body
	StageDNS         Stage = "dns"          // name resolution (zero on a reused connection)
	StageConnect     Stage = "connect"      // TCP handshake: one network round trip
	StageTLS         Stage = "tls"          // TLS handshake
	StageConnWait    Stage = "conn_wait"    // the rest of getting a connection (pool wait, dial set-up)
	StageWrite       Stage = "write"        // writing the request headers and body
	StageWaitHeaders Stage = "wait_headers" // request written → response headers received
	StageFirstToken  Stage = "first_token"  // response headers → first chunk that carries content
	// StageThinking follows the client stages for a reasoning model: its
	// first token (reasoning) → its first answer token. It is not in
	// Request.Stages (they add up to TTFT); the aggregator derives it.
	StageThinking Stage = "thinking"
)

// Breakdown stages: where the time between "request written" and "first token"
// went, as far as latscope can tell. Provenance varies per request.
const (
	StageNetworkOut Stage = "network_out" // request's trip to the server (estimated: half the connect RTT)
	// StageProxy is the proxy hop in front of the server (nginx, Envoy, a
	// load balancer): what the proxy reports for the request less what the
	// server behind it reports, i.e. its own accept, parsing, upstream
	// connection and relaying.
	StageProxy    Stage = "proxy"
	StageHTTP     Stage = "http"     // server's HTTP parsing
	StageTokenize Stage = "tokenize" // prompt tokenization / validation / templating
	// StageServerWait is the server's time between the request's arrival
	// and its prefill where the server does not tell its front end (HTTP,
	// tokenization, scheduling) and its queue apart; it is called queue
	// only on evidence (see attribute.Attribute).
	StageServerWait  Stage = "server_wait"
	StageQueue       Stage = "queue"        // waiting for a batch slot
	StagePrefill     Stage = "prefill"      // prompt forward pass
	StageFirstDecode Stage = "first_decode" // first decode step
	// Disaggregated prefill and decode (prefill and decode on different
	// workers): the wait for a prefill worker, the KV cache's transfer from
	// it to the decode worker, and the wait there for a batch slot. The
	// prefill is then the prefill worker's and the first decode the decode
	// worker's.
	StagePrefillQueue  Stage = "prefill_queue"
	StageKVTransfer    Stage = "kv_transfer"
	StageDecodeQueue   Stage = "decode_queue"
	StageDetokenize    Stage = "detokenize"     // detokenization of the first token (and its framing where the server does not tell them apart)
	StageSSEFraming    Stage = "sse_framing"    // framing, writing and flushing the first SSE event
	StageNetworkReturn Stage = "network_return" // first frame's trip back (estimated: half the connect RTT)
	StageUnattributed  Stage = "unattributed"   // what no source accounts for; never spread over other stages
)

// ClientStages returns the client stages in the order the probe measures
// them (a new slice each call).
func ClientStages() []Stage {
	return []Stage{
		StageSchedLag, StageSerialize, StageDNS, StageConnect, StageTLS,
		StageConnWait, StageWrite, StageWaitHeaders, StageFirstToken,
	}
}

// BreakdownStages returns the breakdown stages in the order a request
// crosses them: the client's own stages up to the write, then the server
// window, then what no source accounts for (a new slice each call).
func BreakdownStages() []Stage {
	return []Stage{
		StageSchedLag, StageSerialize, StageDNS, StageConnect, StageTLS, StageConnWait, StageWrite,
		StageNetworkOut, StageProxy, StageHTTP, StageTokenize, StageServerWait, StageQueue, StagePrefillQueue,
		StagePrefill, StageKVTransfer, StageDecodeQueue, StageFirstDecode, StageDetokenize, StageSSEFraming, StageNetworkReturn, StageUnattributed,
	}
}

// StageTiming is one stage's duration with where the number came from.
type StageTiming struct {
	Stage      Stage         `json:"stage"`
	Duration   time.Duration `json:"ns"`
	Provenance Provenance    `json:"prov"`
	// Source names the specific source of a server-reported or estimated number,
	// e.g. "llamacpp.timings", "otlp", "metrics.interval", "connect_rtt".
	Source string `json:"src,omitempty"`
}

// Chunk is one streamed frame that carried content, as the client saw it.
// It is kept small (16 bytes) because the probe appends one per frame.
type Chunk struct {
	// At is the arrival time as an offset from Request.Start.
	At time.Duration `json:"t"`
	// Tokens is how many output tokens the frame carried (1 unless the server
	// batches tokens into frames, or usage says otherwise).
	Tokens int32 `json:"n"`
	// Batch is how many events arrived in the same read from the socket as
	// this one; more than 1 hints at coalescing (Nagle, proxies, buffering).
	Batch int32 `json:"b,omitempty"`
}

// Outcome is how a request ended: OK, cancelled by the run, abandoned by
// the probe on purpose, or exactly one error kind.
type Outcome string

// The outcomes. Every request the probe sends ends in exactly one of these,
// so sent = ok + errors + cancelled + abandoned always holds.
const (
	OutcomeOK          Outcome = "ok"
	OutcomeConnect     Outcome = "connect"      // could not connect (refused, DNS, TLS)
	OutcomeTimeout     Outcome = "timeout"      // request or stream deadline passed
	OutcomeHTTPStatus  Outcome = "http_status"  // non-2xx status; see Request.Status
	OutcomeStreamReset Outcome = "stream_reset" // connection closed or reset before the stream ended
	OutcomeMalformed   Outcome = "malformed"    // a chunk that does not parse
	OutcomeOversized   Outcome = "oversized"    // one event larger than the probe's limit
	OutcomeServerError Outcome = "server_error" // the server sent an error event mid-stream
	OutcomeCancelled   Outcome = "cancelled"    // the run stopped it mid-request (its duration and drain over, a signal, a quit): not an error; see Request.RunEnded
	// OutcomeAbandoned: the probe closed the stream on purpose, as a user
	// who pressed stop (--cancel-after): neither an error nor cancelled by
	// the run, and kept out of the latency statistics. See Request.Abandon.
	OutcomeAbandoned Outcome = "abandoned"
)

// Flag marks something noteworthy about one request that is not an error.
type Flag string

// The flags.
const (
	FlagMissingUsage  Flag = "missing_usage"   // usage was asked for but the stream ended without it
	FlagUTF8Defect    Flag = "utf8_defect"     // the server sent U+FFFD replacement characters (a split multi-byte character)
	FlagNagleSuspect  Flag = "nagle_suspect"   // an inter-token gap near 40 ms, the signature of Nagle/delayed-ACK coalescing
	FlagRoleOnlyFirst Flag = "role_only_first" // the first event carried no content (role-only or empty), as with chunked prefill
	FlagNoContent     Flag = "no_content"      // the stream ended normally but carried no content chunk
	// FlagPromptCached: the server took at least half of the prompt's tokens
	// from its prompt (prefix) cache (ServerTiming.CachedTokens), so the
	// request's prefill is not a cold prefill.
	FlagPromptCached Flag = "prompt_cached"
	// FlagCanary: the request is latscope's canary beside a server's own
	// traffic (latscope watch --canary-rate), not one of its users'.
	FlagCanary Flag = "canary"
	// FlagServerReported: the record is the server's own span of a request
	// latscope did not send (one of its users', in a watch): every time in
	// it is the server's, the client saw none of it, and it carries no
	// chunks. The aggregator keeps such records apart from the statistics
	// of latscope's own requests (see aggregate.UserSpans).
	FlagServerReported Flag = "server_reported"
)

// Request is the complete record of one probe request, written once when the
// request ends (successfully or not).
type Request struct {
	ID      string `json:"id"`                 // X-Request-Id sent to the server
	TraceID string `json:"trace_id,omitempty"` // W3C trace id sent in traceparent
	SpanID  string `json:"span_id,omitempty"`  // the client span id sent in traceparent (the server's spans' parent)
	Seq     uint64 `json:"seq"`                // 0-based send order within the run
	Worker  int    `json:"worker,omitempty"`
	Target  string `json:"target,omitempty"` // base URL
	Dialect string `json:"dialect"`          // e.g. "openai-chat", "llamacpp", "ollama-generate"
	Model   string `json:"model,omitempty"`
	Warmup  bool   `json:"warmup,omitempty"` // kept out of statistics

	PromptTokens       int `json:"prompt_tokens"`                  // as the server counted them (usage), else the probe's target
	TargetOutputTokens int `json:"target_output_tokens,omitempty"` // what the probe asked for
	OutputTokens       int `json:"output_tokens"`                  // from usage where sent, else counted from the deltas

	// Intended is when the request should have been sent (open loop); latency
	// counts from here so a slow probe cannot hide queueing (no coordinated
	// omission). Equal to Start in closed loop.
	Intended time.Time `json:"intended"`
	// Start is when the probe began building the request (wall clock with the
	// monotonic reading while in process).
	Start time.Time `json:"start"`
	// SchedLag is Start - Intended: how late the probe itself was.
	SchedLag time.Duration `json:"sched_lag_ns,omitempty"`

	// Stages are the client-measured stages up to the first token, contiguous.
	Stages []StageTiming `json:"stages,omitempty"`
	// Breakdown splits the TTFT by cause; filled by the attributor when server
	// data is available. Its durations add up to TTFT.
	Breakdown []StageTiming `json:"breakdown,omitempty"`

	// ConnectRTT is a new connection's round trip, the network estimate's
	// sample: the kernel's lowest measured on it where it says (Linux), else
	// the TCP handshake's time as the client timed it.
	ConnectRTT time.Duration `json:"connect_rtt_ns,omitempty"`
	ReusedConn bool          `json:"reused_conn,omitempty"`

	FirstEvent time.Duration `json:"first_event_ns,omitempty"` // first stream event of any kind (may be role-only)
	TTFT       time.Duration `json:"ttft_ns,omitempty"`        // Intended → first chunk with content (reasoning or answer)
	E2E        time.Duration `json:"e2e_ns,omitempty"`         // Intended → end of stream
	Chunks     []Chunk       `json:"chunks,omitempty"`         // every content frame
	// TTFTAnswer is Intended → the first answer chunk, set only when the
	// model reasoned first (ReasoningTokens > 0); zero then means no answer
	// token came. Without reasoning the answer began at TTFT.
	TTFTAnswer time.Duration `json:"ttft_answer_ns,omitempty"`
	// ReasoningTokens counts the output tokens that were reasoning
	// (thinking) rather than answer: the server's usage where it says,
	// else the reasoning deltas. OutputTokens includes them.
	ReasoningTokens int `json:"reasoning_tokens,omitempty"`

	Outcome Outcome `json:"outcome"`
	// RunEnded marks a request the run's end cut short: its duration and
	// drain over, or its user stopping it (SIGINT, SIGTERM, SIGHUP, a quit
	// dashboard). The probe sets it on every cancelled request; such a
	// request is counted apart from the errors, as is a cancelled one
	// without it (recordings from before it was set on a signal). A request
	// the server cut, or that its --timeout ended, is an error, never
	// cancelled.
	RunEnded bool   `json:"run_ended,omitempty"`
	Status   int    `json:"status,omitempty"` // HTTP status, when one arrived
	Error    string `json:"error,omitempty"`
	Flags    []Flag `json:"flags,omitempty"`
	// ReplacementChars counts U+FFFD in the streamed text (see FlagUTF8Defect).
	ReplacementChars int `json:"replacement_chars,omitempty"`

	// Server holds what the server reported about this request, if anything.
	Server *ServerTiming `json:"server_timing,omitempty"`

	// HTTP2 is what the frames said of the request's stream when it went
	// over HTTP/2 (run --http2 or --h2c); nil over HTTP/1.1.
	HTTP2 *HTTP2Stream `json:"http2,omitempty"`

	// Session and Turn place a request in a conversation (--conversation):
	// the session's id and the turn's 1-based index; empty and 0 outside
	// one. A turn's prompt is the conversation so far and a new message.
	Session string `json:"session,omitempty"`
	Turn    int    `json:"turn,omitempty"`

	// Abandon is set on a request the probe abandoned on purpose
	// (OutcomeAbandoned).
	Abandon *Abandon `json:"abandon,omitempty"`
}

// HTTP2Stream is one request's HTTP/2 stream as the probe saw its frames.
// The request's stages are timed as over HTTP/1.1 (the stream that opened
// a connection carries its connect and TLS, later ones find it open).
type HTTP2Stream struct {
	Conn   int    `json:"conn"`             // which of the run's connections, numbered from 1 in the order opened
	Stream uint32 `json:"stream,omitempty"` // the stream id; 0: its headers never went out
	// DataFrames counts the response's DATA frames; FirstData is the first
	// one's arrival (from Start), MaxFrameGap the longest wait between two.
	DataFrames  int           `json:"data_frames,omitempty"`
	FirstData   time.Duration `json:"first_data_ns,omitempty"`
	MaxFrameGap time.Duration `json:"max_frame_gap_ns,omitempty"`
	// Flow-control stalls, from the frames: SendStalls counts the times the
	// request's body used up the window the server gave it and waited for
	// its WINDOW_UPDATE (SendStallWait in all); RecvStalls the times the
	// response used up the window the client gave it, the server then
	// waiting for the client's WINDOW_UPDATE, RecvStallWait until the client
	// sent it.
	SendStalls    int           `json:"send_stalls,omitempty"`
	SendStallWait time.Duration `json:"send_stall_ns,omitempty"`
	RecvStalls    int           `json:"recv_stalls,omitempty"`
	RecvStallWait time.Duration `json:"recv_stall_ns,omitempty"`
	// GoAwayRetry: the request went out a second time, on a new connection,
	// because the server's GOAWAY (or a close) came before it took the
	// first; the stages are the second attempt's.
	GoAwayRetry bool `json:"goaway_retry,omitempty"`
}

// Abandon is what is known of a request the probe abandoned as a user who
// pressed stop: when, and when the server let its batch slot go.
type Abandon struct {
	// Rule is the rule that abandoned it, as given: "tokens=8", "time=2s".
	Rule string `json:"rule"`
	// At is Intended → the moment the probe closed the stream.
	At time.Duration `json:"at_ns"`
	// Release is the moment the stream was closed → the server's running
	// gauge showed the slot free (see ReleaseSource); zero when not
	// measured (ReleaseNote says why).
	Release time.Duration `json:"release_ns,omitempty"`
	// ReleaseSource names the gauge watched, e.g.
	// "metrics:vllm:num_requests_running".
	ReleaseSource string `json:"release_src,omitempty"`
	// ReleaseNote says why no release was measured, or what bounds it.
	ReleaseNote string `json:"release_note,omitempty"`
}

// SentAt is when the request should have been sent (Intended), falling back
// to when it started.
func (r *Request) SentAt() time.Time {
	if !r.Intended.IsZero() {
		return r.Intended
	}
	return r.Start
}

// EndedAt is when the request ended: its intended send plus E2E (which
// counts from the intended time), or its start when it has no E2E (it
// failed to connect). Statistics file a request under this time.
func (r *Request) EndedAt() time.Time {
	if r.E2E > 0 {
		return r.SentAt().Add(r.E2E)
	}
	if !r.Start.IsZero() {
		return r.Start
	}
	return r.Intended
}

// OK reports whether the request succeeded.
func (r *Request) OK() bool { return r.Outcome == OutcomeOK }

// Failed reports whether the request failed: neither ok nor cancelled by
// the run (a request the run's end cut short did not fail).
func (r *Request) Failed() bool {
	return r.Outcome != OutcomeOK && r.Outcome != OutcomeCancelled && r.Outcome != OutcomeAbandoned
}

// Abandoned reports whether the probe abandoned the request on purpose.
func (r *Request) Abandoned() bool { return r.Outcome == OutcomeAbandoned }

// HasFlag reports whether f is set.
func (r *Request) HasFlag(f Flag) bool {
	for _, g := range r.Flags {
		if g == f {
			return true
		}
	}
	return false
}

// ITLs returns the gaps between consecutive content chunks. A chunk of three
// tokens is one gap, not three.
func (r *Request) ITLs() []time.Duration {
	if len(r.Chunks) < 2 {
		return nil
	}
	out := make([]time.Duration, 0, len(r.Chunks)-1)
	for i := 1; i < len(r.Chunks); i++ {
		out = append(out, r.Chunks[i].At-r.Chunks[i-1].At)
	}
	return out
}

// Reasoned reports whether the model streamed reasoning before (or
// besides) its answer.
func (r *Request) Reasoned() bool { return r.ReasoningTokens > 0 }

// AnswerTTFT is Intended → the first answer token: TTFTAnswer when the
// model reasoned (zero: it never answered), else TTFT.
func (r *Request) AnswerTTFT() time.Duration {
	if r.Reasoned() {
		return r.TTFTAnswer
	}
	return r.TTFT
}

// Thinking is the stage between the first token and the first answer
// token: zero without reasoning or without an answer.
func (r *Request) Thinking() time.Duration {
	if !r.Reasoned() || r.TTFTAnswer <= 0 || r.TTFTAnswer < r.TTFT {
		return 0
	}
	return r.TTFTAnswer - r.TTFT
}

// AnswerTokens is the output tokens that were not reasoning.
func (r *Request) AnswerTokens() int { return max(r.OutputTokens-r.ReasoningTokens, 0) }

// TTST is Intended → the second output token of any kind: TTFT when the
// first chunk carried two or more tokens, else TTFT plus the first gap;
// zero when the stream carried fewer than two tokens.
func (r *Request) TTST() time.Duration {
	switch {
	case r.TTFT <= 0 || len(r.Chunks) == 0:
		return 0
	case r.Chunks[0].Tokens >= 2:
		return r.TTFT
	case len(r.Chunks) >= 2:
		return r.TTFT + max(r.Chunks[1].At-r.Chunks[0].At, 0)
	}
	return 0
}

// TPOT is (E2E − TTFT) / (output tokens − 1); zero when undefined.
func (r *Request) TPOT() time.Duration {
	if r.OutputTokens < 2 || r.E2E <= r.TTFT {
		return 0
	}
	return (r.E2E - r.TTFT) / time.Duration(r.OutputTokens-1)
}

// TokensPerSecond is the request's output tokens over its E2E.
func (r *Request) TokensPerSecond() float64 {
	if r.E2E <= 0 {
		return 0
	}
	return float64(r.OutputTokens) / r.E2E.Seconds()
}

// ServerTiming is what a server reported about one request, in durations
// (never absolute server timestamps: server and client clocks differ).
type ServerTiming struct {
	// Source names where these came from: "llamacpp.timings", "ollama.final",
	// "tgi.headers", "vllm.metrics", "otlp", "sim.truth".
	Source string `json:"source"`
	// Stages maps breakdown stages (and "decode", "e2e", "ttft", "inference")
	// to the duration the server reported. Absent keys were not reported.
	Stages map[Stage]time.Duration `json:"stages"`
	// PromptTokens counts the whole prompt, the cached part included.
	PromptTokens int `json:"prompt_tokens,omitempty"`
	OutputTokens int `json:"output_tokens,omitempty"`
	// CachedTokens counts the prompt tokens the server took from its prefix
	// cache instead of computing them (llama.cpp timings.cache_n, OpenAI
	// usage.prompt_tokens_details.cached_tokens): the prefill of a request
	// with cached tokens is not a normal one.
	CachedTokens int `json:"cached_tokens,omitempty"`
}

// The ServerTiming.Source of the spans the OTLP receiver takes. The
// collector writes them and the attributor reads each by what its fields
// cover; recordings keep them, so they never change.
const (
	SourceOTLP    = "otlp"     // vLLM's llm_request span
	SourceOTLPTGI = "otlp.tgi" // TGI's router span (validation, queue, inference)
)

// Extra server-side stage names used in ServerTiming.Stages beyond the breakdown stages.
const (
	StageServerTTFT Stage = "server_ttft" // server's own TTFT (its definition, e.g. vLLM: arrival → first token)
	StageDecode     Stage = "decode"      // first → last token
	StageInference  Stage = "inference"   // prefill + decode
	StageServerE2E  Stage = "server_e2e"  // server's own end-to-end
	// StageProxyUpstream is what a proxy reports for the request up to the
	// upstream's response headers (Server-Timing proxy/lb/upstream, Envoy's
	// x-envoy-upstream-service-time): the server's own time included.
	StageProxyUpstream Stage = "proxy_upstream"
	// StageServerHeaders is the server's time from the request's arrival to
	// its response headers (Server-Timing headers): what the proxy's
	// report holds of the server.
	StageServerHeaders Stage = "server_headers"
	// StageServerFirstFrame is the server's time from the request's arrival
	// to its first content frame's flush (Server-Timing first_frame): with
	// it, the rest of the client's server window is the network.
	StageServerFirstFrame Stage = "server_first_frame"
)

// ServerTimingPrefix begins the key of a Server-Timing metric whose name
// latscope does not know: it is kept under its own name and shown on every
// surface as "server: NAME", the name with who reported it.
const ServerTimingPrefix = "server: "

// legacyServerTimingPrefix is what recordings made before called such a
// stage ("st:NAME"): decoding renames it (CanonicalStage).
const legacyServerTimingPrefix = "st:"

// CanonicalStage is stage s under its current name: a recording's
// "st:NAME" is "server: NAME"; any other name is itself.
func CanonicalStage(s Stage) Stage {
	if name, ok := strings.CutPrefix(string(s), legacyServerTimingPrefix); ok {
		return Stage(ServerTimingPrefix + name)
	}
	return s
}

// ServerOwnStage reports whether s is a stage the server reported under
// a name of its own (ServerTimingPrefix), and that name.
func ServerOwnStage(s Stage) (name string, ok bool) {
	return strings.CutPrefix(string(s), ServerTimingPrefix)
}

// canonicalStages renames a decoded request's stages of a name retired
// since its recording was made (CanonicalStage), in place.
func canonicalStages(r *Request) {
	for i := range r.Stages {
		r.Stages[i].Stage = CanonicalStage(r.Stages[i].Stage)
	}
	for i := range r.Breakdown {
		r.Breakdown[i].Stage = CanonicalStage(r.Breakdown[i].Stage)
	}
	if st := r.Server; st != nil {
		for k, v := range st.Stages {
			if c := CanonicalStage(k); c != k {
				delete(st.Stages, k)
				st.Stages[c] = v
			}
		}
	}
}
