package event

import (
	"net/url"
	"strings"
	"time"
)

// Session is the header of one measuring session: what was measured, from
// where, with which load. It is the first record of a recording and of an
// agent's stream, so a replay or a remote dashboard can say what it shows.
// Credentials never appear here: Target and MetricsURL have their userinfo
// removed before the record is built.
type Session struct {
	Time     time.Time `json:"time"`     // when the session started
	Latscope string    `json:"latscope"` // latscope's version
	RunID    string    `json:"run_id,omitempty"`
	// Name tells sessions apart when several are shown together (an agent's
	// --name, else its host).
	Name string `json:"name,omitempty"`
	Host string `json:"host,omitempty"` // the machine the probe ran on
	// Region and Shard are an agent's --region and --shard (i/N): where it
	// measured from and which share of the fleet's load it sent.
	Region string `json:"region,omitempty"`
	Shard  string `json:"shard,omitempty"`

	Target     string `json:"target"`                // base URL, credentials removed
	MetricsURL string `json:"metrics_url,omitempty"` // credentials removed
	Server     string `json:"server,omitempty"`      // server kind, e.g. "vllm", "llamacpp", "latscope-sim"
	Dialect    string `json:"dialect,omitempty"`
	Model      string `json:"model,omitempty"`
	// Simulated marks a session whose target is latscope's own simulator: every
	// number it holds describes the simulator, not a model.
	Simulated bool `json:"simulated,omitempty"`

	Load Load `json:"load"`
}

// Load is the load a session was asked to send.
type Load struct {
	// Mode is "closed" (concurrency), "open" (rate), "steps" (the demo's
	// stepped concurrency), "trace", or one of a watch: LoadWatch (no load
	// of its own) or LoadCanary (an open-loop canary beside the server's
	// own traffic).
	Mode         string        `json:"mode"`
	Concurrency  int           `json:"concurrency,omitempty"`
	Steps        string        `json:"steps,omitempty"`   // stepped closed loop, e.g. "4,8,16 every 20s, repeated"
	Rate         float64       `json:"rate,omitempty"`    // requests per second, open loop
	Arrival      string        `json:"arrival,omitempty"` // poisson, constant, gamma
	Burstiness   float64       `json:"burstiness,omitempty"`
	PromptTokens string        `json:"prompt_tokens,omitempty"` // "N" or "MEAN:STDDEV"
	OutputTokens string        `json:"output_tokens,omitempty"`
	Duration     time.Duration `json:"duration_ns,omitempty"`
	Requests     int           `json:"requests,omitempty"`
	Warmup       int           `json:"warmup,omitempty"`
	SLO          string        `json:"slo,omitempty"`
	// HTTP is the protocol the probe spoke: "" or "1.1", "2" (TLS, ALPN)
	// or "h2c" (HTTP/2 without TLS); Connections the HTTP/2 connections
	// the streams were spread over.
	HTTP        string `json:"http,omitempty"`
	Connections int    `json:"connections,omitempty"`
	// TTFTBasis is which first token the run's TTFT bar and ttft
	// objectives used: "answer" (the default) or "first".
	TTFTBasis string `json:"ttft_basis,omitempty"`
	// Seed is the seed of the prompts and arrivals: the same seed sends the
	// same prompts. SeedDrawn says latscope drew it for this run (no --seed
	// was given); --seed with it repeats the run's prompts.
	Seed      int64 `json:"seed"`
	SeedDrawn bool  `json:"seed_drawn,omitempty"`
	// Conversation and CancelAfter are --conversation and --cancel-after
	// as given ("" without).
	Conversation string `json:"conversation,omitempty"`
	CancelAfter  string `json:"cancel_after,omitempty"`
}

// The load modes of a session that watches a server's own traffic
// (latscope watch).
const (
	LoadWatch  = "watch"
	LoadCanary = "canary"
)

// Watches reports whether the session watches a server's own traffic.
func (l Load) Watches() bool { return l.Mode == LoadWatch || l.Mode == LoadCanary }

// ProbeLagLimit is the open loop's scheduling-lag p99 past which the probe,
// not the server, is the limit: the probe's own check and the summary's
// insight use this one figure. On a small shared machine the Go scheduler
// alone delays a timer by a few ms now and then; only a sustained lag past
// this means the probe cannot keep its schedule.
const ProbeLagLimit = 20 * time.Millisecond

// ProbeRawV1 is the raw evidence a probe sample carries (ProbeSample.Raw)
// when the probe leaves every judgement of it to the aggregator: its
// scheduling lag's quantiles, whether it was the limit, the shared pauses
// of its streams and their causes.
const ProbeRawV1 = 1

// ProbeSample is the probe's view of itself at one moment: how many requests
// it has in flight and whether it, rather than the server, is the limit.
//
// Raw says what the sample carries. Zero (every recording made before
// ProbeRawV1, and every sample the aggregator hands on): SchedLagP99,
// LagSamples, Limited and Reason are judged, and the stream carries the
// probe's own stall and probe_limit markers. ProbeRawV1: the probe only
// measured; SendLags, Late and Sent hold what it measured since its
// previous sample, and the aggregator derives the rest (aggregate.ProbeJudge).
type ProbeSample struct {
	Time        time.Time `json:"time"`
	InFlight    int       `json:"in_flight"`
	MaxInFlight int       `json:"max_in_flight,omitempty"` // the closed loop's concurrency, or the open loop's cap
	// Concurrency is the closed loop's current target (it changes in stepped load).
	Concurrency int `json:"concurrency,omitempty"`
	// CPUPercent is latscope's own CPU use (100 = one core); negative when unknown.
	CPUPercent float64 `json:"cpu_pct"`
	// SchedLagP99 is how late the open loop sent requests, over the recent window.
	SchedLagP99 time.Duration `json:"sched_lag_p99_ns,omitempty"`
	LagSamples  int           `json:"lag_samples,omitempty"`
	// Limited is set while the probe itself is the bottleneck; Reason says how.
	Limited bool   `json:"limited,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// Reconnects counts requests that were sent again on a fresh connection
	// because the server had closed the idle one they first went out on.
	Reconnects int64 `json:"reconnects,omitempty"`
	// Backoffs counts pauses the probe took after connection errors or a
	// server's Retry-After.
	Backoffs int64 `json:"backoffs,omitempty"`
	// H2Connections counts the HTTP/2 connections the probe opened so far
	// (run --http2, --h2c), H2GoAwayRetries the requests it sent again on
	// a new one because a GOAWAY or a close came before their stream was
	// taken.
	H2Connections   int64 `json:"h2_connections,omitempty"`
	H2GoAwayRetries int64 `json:"h2_goaway_retries,omitempty"`

	// Raw is the version of the raw evidence below (ProbeRawV1), 0 for a
	// judged sample.
	Raw int `json:"raw,omitempty"`
	// Cores is how many cores the probe's machine has (CPUPercent's share
	// of all of them is the CPU limit's figure); 0 when unknown.
	Cores int `json:"cores,omitempty"`
	// SendLags are the open loop's sends since the previous sample: when
	// each went out and how late it was against its schedule (a bounded
	// number, the latest kept).
	SendLags []SendLag `json:"send_lags,omitempty"`
	// Late are the stretches since the previous sample in which the
	// probe's own goroutines ran late (a check that woke well after it was
	// due): pauses its streams saw then may be the probe's, not the
	// server's.
	Late []Stretch `json:"late,omitempty"`
	// Sent are the requests sent since the previous sample and still in
	// flight: each one's record comes later in the stream. A stall waits
	// for the records of the requests that were in flight in it.
	Sent []Sent `json:"sent,omitempty"`
}

// SendLag is one open-loop send: At is when it went out, as an offset from
// the sample's Time (negative: before it), and Lag how late it was.
type SendLag struct {
	At  time.Duration `json:"at_ns"`
	Lag time.Duration `json:"lag_ns"`
}

// Stretch is a stretch of time.
type Stretch struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// Sent is one request that went out: its id and when it was written.
type Sent struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
}

// Span is the server's own timing of one request (e.g. from an OTLP trace
// span), keyed by the ids the probe sent. The attributor joins it onto the
// request record; it is not passed on to consumers.
type Span struct {
	Time      time.Time    `json:"time"` // when it was received
	RequestID string       `json:"request_id,omitempty"`
	TraceID   string       `json:"trace_id,omitempty"`
	Timing    ServerTiming `json:"timing"`
	// End is when the span ended by the server's clock (OTLP's
	// end_time_unix_nano); zero when it did not say.
	End time.Time `json:"end,omitzero"`
}

// Loss says that a consumer did not get some events: a lossy consumer (a
// screen, a remote viewer) fell behind, or an agent's replay ring no longer
// held what a reconnecting client asked for. Losses are never silent.
type Loss struct {
	Time     time.Time `json:"time"`
	Consumer string    `json:"consumer"`
	Events   int64     `json:"events"` // how many events were missed
	Reason   string    `json:"reason,omitempty"`
}

// Consumers whose Loss records mean something particular.
const (
	// ConsumerRecorder: the recording could not write these events (a full
	// disk, ...). They reached every other consumer, so they are in the
	// statistics, but not in the file.
	ConsumerRecorder = "recorder"
	// ConsumerAttach: an attach client dropped these events because their
	// ids went backwards (a repeated id is taken for a duplicate).
	ConsumerAttach = "attach"
	// ConsumerExport: the OTLP collector never got these spans (exports
	// that failed, or spans still unsent when the flush deadline passed).
	// Events counts spans. The requests are in the statistics, only not in
	// the collector.
	ConsumerExport = "otlp collector"
)

// RedactURL returns raw with any userinfo (user:password@) and the values of
// query parameters removed, for printing and recording. A string that does
// not parse as a URL is returned with everything up to an '@' removed.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if i := strings.LastIndex(raw, "@"); i >= 0 {
			return "REDACTED@" + raw[i+1:]
		}
		return raw
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{"REDACTED"}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}
