package attribute

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/promdialect"
)

// Sources of the estimates and measurements the attributor adds.
const (
	SourceConnectRTT      = "connect_rtt"
	SourceMetricsInterval = "metrics.interval"
	SourceResidual        = "residual"
	// SourceWaitHeaders is a server wait the client measured as its wait
	// for the response headers, from a server that sends them when a slot
	// takes the request (HeadersAtSlot): front end and queue, a queue only
	// when the queue gauge showed requests waiting.
	SourceWaitHeaders = "wait_headers"
	// SourceWindowRest is a server wait estimated as what is left of the
	// server window once the server's own prefill and the round trip are
	// placed, for a server that reports its prefill per request but no
	// queue (llama.cpp); a queue only when its queue gauge showed requests
	// waiting.
	SourceWindowRest = "server_window_rest"
)

// AttributionInput is what Attribute joins onto one request's own record.
type AttributionInput struct {
	// Server is the request's timing as its server reported it (in the
	// stream, or in a span); nil when there is none.
	Server *event.ServerTiming
	// Interval holds the server's interval statistics, the fallback when
	// Server has no usable stage; nil when there are none.
	Interval *event.ServerSample
	// RecentQueueLimit, when set, is the longest queue wait the server's
	// recent intervals make plausible (the attributor keeps the largest
	// over intervalMemoryAge): one interval holds few requests, and a
	// request that queued long may finish in one where the others did not.
	// Zero takes the limit from Interval alone.
	RecentQueueLimit time.Duration
	// Network is the round trip to the request's target.
	Network NetworkEstimate
	// ServerKind is the kind of server measured, as in event.Session.Server
	// ("llamacpp", "vllm", ...). It says whether the wait for the response
	// headers is the slot wait (HeadersAtSlot).
	ServerKind string
	// Queue is what the server's queue-depth gauge (vLLM
	// num_requests_waiting, llama.cpp requests_deferred) showed while the
	// request was at the server. It is the evidence that decides whether
	// a wait the server does not split (front end and queue) is called a
	// queue: only when the gauge showed requests waiting; else it is
	// StageServerWait.
	Queue QueueGauge
	// FrontEnd is the recent floor of server waits: where Queue shows
	// requests waiting, a wait the server does not split is its queue only
	// beyond it (splitWait).
	FrontEnd FrontEndFloor
}

// queueEvidence is the queue gauge's verdict for one request with the
// gauge's name, for the Source of what it decides, and the front-end floor
// that a queue begins above.
type queueEvidence struct {
	gauge    QueueGauge
	name     string
	frontEnd FrontEndFloor
}

// evidence returns in's queue gauge verdict, named after the metrics
// dialect's waiting gauge where the interval says which.
func (in AttributionInput) evidence() queueEvidence {
	name := "the server's queue gauge"
	if in.Interval != nil {
		if d, err := promdialect.ByName(in.Interval.Dialect); err == nil && len(d.Waiting) > 0 {
			name = d.Waiting[0].Name
		}
	}
	return queueEvidence{gauge: in.Queue, name: name, frontEnd: in.FrontEnd}
}

// waiting reports whether the gauge showed requests waiting.
func (q queueEvidence) waiting() bool { return q.gauge == QueueWaiting }

// note says what the gauge showed, for a Source.
func (q queueEvidence) note() string {
	switch q.gauge {
	case QueueWaiting:
		return "taken as queue: " + q.name + " showed requests waiting while this one was at the server"
	case QueueEmpty:
		return "not a queue: " + q.name + " showed no request waiting while this one was at the server"
	}
	return "front end and queue not told apart: no reading of " + q.name + " covers this request"
}

// QueueGauge is what the server's queue-depth readings showed while one
// request was at the server.
type QueueGauge int

// The queue gauge's verdicts.
const (
	QueueUnknown QueueGauge = iota // no reading covers the request
	QueueEmpty                     // readings, none with a request waiting
	QueueWaiting                   // a reading showed requests waiting
)

// NetworkEstimate is the round trip that network_out and network_return
// split between them.
type NetworkEstimate struct {
	RTT time.Duration // zero: no network estimate
	// Samples is how many recent connect times RTT is the lowest of; zero
	// when not said.
	Samples int
}

func (n NetworkEstimate) source() string {
	switch {
	case n.Samples > 1:
		return fmt.Sprintf("%s (min of %d)", SourceConnectRTT, n.Samples)
	case n.Samples == 1:
		return SourceConnectRTT + " (1 sample)"
	}
	return SourceConnectRTT
}

// ServerHeaderTiming says when one kind of server sends the headers of a
// streamed response, which decides what the client's wait_headers holds.
type ServerHeaderTiming struct {
	Server string // as in event.Session.Server
	// AtSlot is set where the headers leave when a batch slot takes the
	// request: wait_headers, less the round trip, is then the slot wait.
	AtSlot bool
	When   string // when the headers leave, in words
}

// HeaderTimings lists the servers whose header timing is known. A server
// that is not listed is never assumed to send its headers at slot time.
func HeaderTimings() []ServerHeaderTiming {
	return []ServerHeaderTiming{
		// llama-server answers once a slot has taken the task; the prompt's
		// processing (timings.prompt_ms) follows the headers.
		{Server: "llamacpp", AtSlot: true, When: "when a slot takes the request"},
		// vLLM's OpenAI server starts the event stream before the engine
		// has even queued the request.
		{Server: "vllm", When: "at once, before the request is queued"},
		// latscope's simulator behaves as vLLM does, unless told otherwise
		// (sim --headers), which its model list says.
		{Server: "latscope-sim", When: "at once, before the request is queued"},
		{Server: "latscope-sim-slotted", AtSlot: true, When: "when a batch slot takes the request"},
		{Server: "latscope-sim-first-token", When: "with the first token"},
		// TGI's streaming routes send the headers before generation.
		{Server: "tgi", When: "at once, before the request is queued"},
		// llm-d-inference-sim (detected as llm-d-sim) holds the headers
		// until the first token.
		{Server: "llm-d-sim", When: "with the first token"},
	}
}

// HeadersAtSlot reports whether a server of this kind sends a streamed
// response's headers when a slot takes the request, so that the client can
// measure the slot wait. False for any kind whose behaviour is not known.
func HeadersAtSlot(server string) bool {
	for _, h := range HeaderTimings() {
		if h.Server == server {
			return h.AtSlot
		}
	}
	return false
}

// Attribute splits r's TTFT into the breakdown stages, in order: the client
// stages before the server (measured, copied from r.Stages), network_out
// (estimated, half the round trip), the server stages, network_return
// (estimated, the other half) and unattributed, which is TTFT minus
// everything else. The durations always add up exactly to r.TTFT.
//
// The server stages come from the best source for this request. Its own
// numbers (in.Server) come first; where they do not fit the server window
// (TTFT minus the client stages before it, i.e. wait_headers + first_token)
// the network estimates are dropped, and if the server's numbers alone
// still exceed it they are kept and unattributed goes negative, with a note
// in its Source: the server's clock or definitions disagree with the
// client's, and hiding that would be wrong.
//
// Without them, the interval's means are fitted into the window (see
// fitInterval): they are not this request's numbers, so none may run past
// the window (a mean is cut to what is left of it), and what the other
// stages leave is the server wait. All of these are estimated, and their
// Source says how they were derived.
//
// Where the server sends its headers when a slot takes the request
// (HeadersAtSlot(in.ServerKind)), the server wait is the client's own
// measurement: wait_headers less the round trip.
//
// A server wait holds the server's front end and any queue, not told
// apart. It is called a queue only on evidence: the server's queue gauge
// (in.Queue) showed requests waiting while this request was at the server;
// then it is estimated, and its Source names the gauge. A queue the server
// reports for the request itself is always its own stage.
//
// Every estimate dropped or limited is named in unattributed's Source.
// Nothing is ever spread over other stages.
func Attribute(r *event.Request, in AttributionInput) []event.StageTiming {
	out, _ := attribute(r, in)
	return out
}

// attribute is Attribute, and the server wait it placed (front end and
// queue that the server did not tell apart), nil when it placed none: the
// attributor keeps it for the front-end floor.
func attribute(r *event.Request, in AttributionInput) ([]event.StageTiming, *placedWait) {
	out, window := clientBeforeServer(r)
	rtt := max(in.Network.RTT, 0)
	netSource := in.Network.source()
	if d, src, ok := serverTimingNetwork(window, in.Server); ok {
		rtt, netSource = d, src
	}
	ev := in.evidence()
	slot := slotWait(r, in.Server, in.ServerKind, rtt, ev)
	cached := cachedNote(in.Server, r.PromptTokens)

	var fit serverFit
	if own := serverStages(in.Server, cached); len(own) > 0 {
		var unknownNotes []string
		if in.Server.Source == SourceServerTiming {
			own, unknownNotes = fitUnknownServerTiming(own, window, rtt)
		}
		fit = fitReported(window, own, slot, rtt)
		fit = restQueue(fit, window, rtt, ev, in.Server.Source)
		fit.notes = append(fit.notes, unknownNotes...)
	} else {
		fit = fitInterval(window, intervalEstimates(in.Interval, cached), slot, rtt, in.RecentQueueLimit, ev)
	}

	if fit.network {
		out = append(out, event.StageTiming{Stage: event.StageNetworkOut, Duration: rtt / 2, Provenance: event.Estimated, Source: netSource})
	}
	out = append(out, fit.stages...)
	if fit.network {
		out = append(out, event.StageTiming{Stage: event.StageNetworkReturn, Duration: rtt - rtt/2, Provenance: event.Estimated, Source: netSource})
	}
	rest := r.TTFT - sumStages(out)
	notes := fit.notes
	if rest < 0 && !slices.ContainsFunc(notes, func(n string) bool { return strings.HasPrefix(n, "negative") }) {
		if window < 0 {
			notes = append(notes, "negative: the client stages exceed the TTFT")
		} else {
			notes = append(notes, "negative: the stages exceed the client's server window")
		}
	}
	src := SourceResidual
	if len(notes) > 0 {
		src += "; " + strings.Join(notes, "; ")
	}
	return append(out, event.StageTiming{Stage: event.StageUnattributed, Duration: rest, Provenance: event.Estimated, Source: src}), fit.wait
}

// clientBeforeServer copies r's client stages up to the server (all but
// wait_headers and first_token) and returns them with the server window:
// the rest of the TTFT.
func clientBeforeServer(r *event.Request) (stages []event.StageTiming, window time.Duration) {
	var pre time.Duration
	for _, s := range r.Stages {
		switch s.Stage {
		case event.StageWaitHeaders, event.StageFirstToken:
			continue
		}
		if s.Provenance == "" {
			s.Provenance = event.Measured
		}
		stages = append(stages, s)
		pre += s.Duration
	}
	return stages, r.TTFT - pre
}

func clientStage(r *event.Request, stage event.Stage) (time.Duration, bool) {
	for _, s := range r.Stages {
		if s.Stage == stage {
			return s.Duration, true
		}
	}
	return 0, false
}

func sumStages(stages []event.StageTiming) time.Duration {
	var sum time.Duration
	for _, s := range stages {
		sum += s.Duration
	}
	return sum
}

// serverFit is the server's part of one breakdown.
type serverFit struct {
	stages  []event.StageTiming // in breakdown order
	network bool                // the network estimates fit too
	notes   []string            // what was dropped or limited, for unattributed's Source
	wait    *placedWait         // the server wait placed among stages, if any
}

// place adds a server wait to the fit's stages.
func (f *serverFit) place(w *placedWait) {
	f.stages = append(f.stages, w.stages...)
	f.wait = w
}

const (
	noteNetworkDropped = "network estimates dropped: they do not fit the server window"
	noteServerNegative = "negative: server-reported stages exceed the client's server window (clocks or definitions disagree)"
)

// fitReported places the server's own numbers for this request (and the
// measured slot wait, if they have no queue): they are kept even when they
// exceed the window; the network estimates only when they fit beside them.
func fitReported(window time.Duration, own []event.StageTiming, slot *placedWait, rtt time.Duration) serverFit {
	fit := serverFit{stages: own}
	if slot != nil && !slices.ContainsFunc(own, func(s event.StageTiming) bool {
		return s.Stage == event.StageQueue || s.Stage == event.StageServerWait
	}) {
		fit.stages = slices.Clone(own)
		fit.place(slot)
		sortBreakdown(fit.stages)
	}
	sum := sumStages(fit.stages)
	if rtt > 0 {
		if sum+rtt <= window {
			fit.network = true
		} else {
			fit.notes = append(fit.notes, noteNetworkDropped)
		}
	}
	if sum > window {
		fit.notes = append(fit.notes, noteServerNegative)
	}
	return fit
}

// restQueue adds the wait a server that reports the request's prefill but
// no queue (llama.cpp's timings.prompt_ms) leaves out: what is left of the
// server window once the reported stages and the round trip are placed. It
// is estimated, and a server wait (front end and queue, not told apart)
// unless the server's queue gauge showed requests waiting while this one
// was at the server: then most of it is the wait for a slot, it is a
// queue, and its Source names the rest it also holds.
func restQueue(fit serverFit, window, rtt time.Duration, ev queueEvidence, source string) serverFit {
	if !prefillWithoutQueue(fit.stages) {
		return fit
	}
	placed := sumStages(fit.stages)
	if fit.network {
		placed += rtt
	}
	left := window - placed
	if left <= 0 {
		return fit
	}
	fit.place(splitWait(left, event.Estimated, SourceWindowRest, []string{windowRestNote(source, fit.network)}, ev))
	sortBreakdown(fit.stages)
	return fit
}

// prefillWithoutQueue reports whether the server's stages hold a prefill
// and nothing that comes before it (HTTP, tokenization, queue).
func prefillWithoutQueue(stages []event.StageTiming) bool {
	prefill := false
	for _, s := range stages {
		switch s.Stage {
		case event.StagePrefill:
			prefill = true
		case event.StageHTTP, event.StageTokenize, event.StageServerWait, event.StageQueue:
			return false
		}
	}
	return prefill
}

// windowRestNote says what a wait from restQueue holds: any wait for a
// slot, and every other step between the request's arrival and its first
// token's departure that the server's prefill leaves out.
func windowRestNote(source string, lessRTT bool) string {
	prefill := "the reported prefill"
	if source == sourceLlamaCpp {
		prefill = "prompt_ms"
	}
	less := prefill
	if lessRTT {
		less += " and the connect RTT"
	}
	return fmt.Sprintf("server window less %s: any queue wait plus HTTP parsing, tokenization, the server loop's turn and framing the first token", less)
}

// intervalEstimate is what the interval statistics say about a request
// without numbers of its own.
type intervalEstimate struct {
	// means are the stage means in the order they are fitted: prefill,
	// then tokenize.
	means      []stageMean
	hasQueue   bool
	queueLimit time.Duration // see plausibleQueue
	limitWhat  string        // what queueLimit is, in words
}

// stageMean is one interval mean, with what its Source must say.
type stageMean struct {
	stage event.Stage
	mean  time.Duration
	notes []string
}

// fitInterval fits the interval's estimates into one request's server
// window, the firmest first: the measured slot wait, the network round trip
// (from the client's own connects), the prefill mean, then the tokenize
// mean. A mean longer than what is left is cut to it: the window bounds
// this request's stages, and a request whose whole window is shorter than
// the mean prefill did not queue. The queue is then what is still left
// (when nothing measured it): a request that did not queue while others did
// has little left, so it gets a small queue, and one that waited long gets
// its wait. It is never below zero and never above the longest wait the
// interval, or the recent ones, make plausible (plausibleQueue,
// recentLimit); what it leaves over stays unattributed. But that rest is
// only called a queue on evidence: the server's queue gauge showed requests
// waiting while this request was at the server. Otherwise it is a server
// wait (front end and queue, not told apart), the whole rest: with slots to
// spare no queue is made up from the server's front end.
func fitInterval(window time.Duration, est intervalEstimate, slot *placedWait, rtt, recentLimit time.Duration, ev queueEvidence) serverFit {
	var fit serverFit
	left := window
	if slot != nil {
		fit.place(slot)
		left -= slot.wait
	}
	if rtt > 0 {
		if rtt <= left {
			fit.network = true
			left -= rtt
		} else {
			fit.notes = append(fit.notes, noteNetworkDropped)
		}
	}
	for _, m := range est.means {
		d, notes := m.mean, m.notes
		switch {
		case left <= 0:
			fit.notes = append(fit.notes, fmt.Sprintf("interval %s mean dropped: nothing is left of this request's server window", m.stage))
			continue
		case d > left:
			d, notes = left, append(slices.Clone(notes), "the mean cut to what is left of this request's server window")
		}
		fit.stages = append(fit.stages, event.StageTiming{Stage: m.stage, Duration: d, Provenance: event.Estimated,
			Source: withNotes(SourceMetricsInterval, notes...)})
		left -= d
	}
	switch {
	case slot != nil || (len(est.means) == 0 && !est.hasQueue):
		// The slot wait holds the front end and queue already; without
		// any server estimate the rest is not known to be the server's.
	case ev.waiting() && est.hasQueue:
		q, capped := queueFit(left, est, recentLimit, ev)
		fit.stages = append(fit.stages, q)
		if capped {
			fit.notes = append(fit.notes, "queue limited to what the interval makes plausible")
		}
	case left > 0:
		fit.place(splitWait(left, event.Estimated, SourceMetricsInterval, []string{"fit: the rest of the server window, front end and queue"}, ev))
	}
	sortBreakdown(fit.stages)
	return fit
}

// queueFit is one request's queue estimate from the interval: what is left
// of its server window once the other stages are placed, between zero and
// the larger of est.queueLimit and recentLimit. capped says the window left
// more than that.
func queueFit(left time.Duration, est intervalEstimate, recentLimit time.Duration, ev queueEvidence) (stage event.StageTiming, capped bool) {
	limit, what := est.queueLimit, est.limitWhat
	if recentLimit > limit {
		limit, what = recentLimit, "the longest plausible in recent intervals,"
	}
	src := fmt.Sprintf("%s (fit: the rest of the server window, at most %s %s; %s)", SourceMetricsInterval, what, showDuration(limit), ev.note())
	return event.StageTiming{Stage: event.StageQueue, Duration: min(max(left, 0), limit), Provenance: event.Estimated, Source: src}, left > limit
}

// plausibleQueue is the longest queue wait an interval makes plausible for
// one request: the largest of its queue p99, its queue mean (a p99
// interpolated within a bucket can fall below it) and its TTFT p99. A
// server's TTFT holds the queue wait and is observed at the first token,
// while vLLM observes the queue wait only when the request ends, so the
// TTFT of a request that queued long is often in the interval before its
// end when its queue wait is not. Without percentiles (counter pairs) the
// limit is all of the interval's queue time spent by one request.
func plausibleQueue(s *event.ServerSample) (limit time.Duration, what string) {
	q := s.Stages[string(event.StageQueue)]
	if ttft, ok := s.Stages["ttft"]; ok && ttft.Count > 0 && ttft.P99 > max(q.P99, q.Mean) {
		return ttft.P99, "the interval's TTFT p99"
	}
	if q.P99 > 0 {
		return max(q.P99, q.Mean), "the interval's queue p99"
	}
	total := float64(q.Mean) * q.Count
	switch {
	case !(total > 0):
		return 0, "the interval's queue total"
	case total >= math.MaxInt64:
		return math.MaxInt64, "the interval's queue total"
	}
	return time.Duration(total), "the interval's queue total"
}

// slotHeadersSlack is the least time between the end of a request's prefill
// and its first token that says it waited for a slot after its headers:
// more than a decode step and the framing of one token take.
const slotHeadersSlack = 20 * time.Millisecond

// showDuration rounds d for a Source text.
func showDuration(d time.Duration) string {
	return d.Round(10 * time.Microsecond).String()
}

// slotWait is the wait for a slot the client measured, where the server
// sends its headers when a slot takes the request: wait_headers less the
// round trip, never below zero. It holds the server's front end (HTTP
// parsing, tokenization) as well as any queue, so it is a measured server
// wait, and an (estimated) queue only when the queue gauge showed requests
// waiting. Nil where the server kind is not known to send its headers at
// slot time, or where this request shows otherwise. The server's prefill
// follows the headers, so a first_token shorter than half the reported
// prefill means the headers left later than the slot (another server
// version). And the first token follows the prefill within a step, so a
// first_token longer than the prefill by more than the prefill again (and
// slotHeadersSlack) means the headers left before a slot took the request,
// which then waited after them: llama-server does that for some requests
// when its slots are full. Then the wait is the rest of the server window
// (restQueue), not the wait for the headers.
func slotWait(r *event.Request, st *event.ServerTiming, kind string, rtt time.Duration, ev queueEvidence) *placedWait {
	if !HeadersAtSlot(kind) {
		return nil
	}
	wait, ok := clientStage(r, event.StageWaitHeaders)
	if !ok || wait < 0 {
		return nil
	}
	if first, ok := clientStage(r, event.StageFirstToken); ok && st != nil {
		if prefill, ok := st.Stages[event.StagePrefill]; ok && prefill > 0 && (first < prefill/2 || first-prefill > max(prefill, slotHeadersSlack)) {
			return nil
		}
	}
	notes := []string{kind + " sends its headers when a slot takes the request"}
	if rtt > 0 {
		notes = append(notes, "less the connect RTT")
	}
	notes = append(notes, "includes the server's HTTP parsing and tokenization")
	return splitWait(max(wait-rtt, 0), event.Measured, SourceWaitHeaders, notes, ev)
}

// cachedNote says how much of the prompt the server took from its prefix
// cache, so that a cached prefill is not read as a normal one; "" when it
// took none. promptTokens is the request's prompt length, used when the
// server timing does not say.
func cachedNote(st *event.ServerTiming, promptTokens int) string {
	if st == nil || st.CachedTokens <= 0 {
		return ""
	}
	total := st.PromptTokens
	if total <= 0 {
		total = promptTokens
	}
	if total < st.CachedTokens {
		return fmt.Sprintf("%d prompt tokens cached", st.CachedTokens)
	}
	return fmt.Sprintf("%d of %d prompt tokens cached", st.CachedTokens, total)
}

// withNotes appends the non-empty notes to a source in parentheses.
func withNotes(src string, notes ...string) string {
	notes = slices.DeleteFunc(slices.Clone(notes), func(n string) bool { return n == "" })
	if len(notes) == 0 {
		return src
	}
	return src + " (" + strings.Join(notes, "; ") + ")"
}

// serverBreakdownOrder is the order of the server stages in a breakdown.
var serverBreakdownOrder = []event.Stage{
	event.StageProxy, event.StageHTTP, event.StageTokenize, event.StageServerWait, event.StageQueue,
	event.StagePrefillQueue, event.StagePrefill, event.StageKVTransfer, event.StageDecodeQueue,
	event.StageFirstDecode, event.StageDetokenize, event.StageSSEFraming,
}

// sortBreakdown orders server stages as serverBreakdownOrder does, with
// any stage it does not name (a server's own, from Server-Timing) last.
func sortBreakdown(stages []event.StageTiming) {
	rank := func(s event.Stage) int {
		if i := slices.Index(serverBreakdownOrder, s); i >= 0 {
			return i
		}
		return len(serverBreakdownOrder)
	}
	slices.SortStableFunc(stages, func(a, b event.StageTiming) int {
		return cmp.Compare(rank(a.Stage), rank(b.Stage))
	})
}

// Known per-request sources (event.ServerTiming.Source), besides
// event.SourceOTLP and event.SourceOTLPTGI.
const (
	sourceVLLMMetrics = "vllm.metrics"
	sourceLlamaCpp    = "llamacpp.timings"
	sourceOllama      = "ollama.final"
	sourceTGIHeaders  = "tgi.headers"
	sourceSimTruth    = "sim.truth"
)

// stageLoad is where Ollama's load_duration may be filed (it has no breakdown
// stage of its own).
const stageLoad event.Stage = "load"

// serverStages maps one request's server timing onto breakdown stages, each
// source by what its fields really cover. All are ServerReported. cached,
// when set, is added to the prefill's Source (see cachedNote).
func serverStages(st *event.ServerTiming, cached string) []event.StageTiming {
	if st == nil || len(st.Stages) == 0 {
		return nil
	}
	switch st.Source {
	case event.SourceOTLP, sourceVLLMMetrics:
		return vllmStages(st, cached)
	case sourceOllama:
		return ollamaStages(st, cached)
	case SourceServerTiming:
		return serverTimingStages(st, cached)
	case event.SourceOTLPTGI, sourceTGIHeaders:
		return tgiStages(st)
	}
	return breakdownStages(st, cached)
}

// timingOf is st's figure for stage s, when it has one that is not negative.
func timingOf(st *event.ServerTiming, s event.Stage) (time.Duration, bool) {
	d, ok := st.Stages[s]
	return d, ok && d >= 0
}

// reportedTiming is a stage the server reported, from src.
func reportedTiming(s event.Stage, d time.Duration, src string) event.StageTiming {
	return event.StageTiming{Stage: s, Duration: d, Provenance: event.ServerReported, Source: src}
}

// vllmStages maps vLLM's timing. queue = scheduled - queued; "prefill" =
// first token - scheduled, so it covers prefill and the first decode step;
// the frontend TTFT (arrival → first token) minus both is the frontend's
// own work. The metrics object's time_to_first_token_ms counts from
// scheduling, so it is the prefill figure, not the frontend TTFT.
func vllmStages(st *event.ServerTiming, cached string) []event.StageTiming {
	var out []event.StageTiming
	queue, hasQueue := timingOf(st, event.StageQueue)
	prefill, hasPrefill := timingOf(st, event.StagePrefill)
	ttft, hasTTFT := timingOf(st, event.StageServerTTFT)
	if st.Source == sourceVLLMMetrics && !hasPrefill && hasTTFT {
		prefill, hasPrefill, hasTTFT = ttft, true, false
	}
	if hasTTFT && hasQueue && hasPrefill && ttft-queue-prefill >= 0 {
		out = append(out, reportedTiming(event.StageTokenize, ttft-queue-prefill,
			st.Source+" (frontend: HTTP parsing, templating, tokenization, IPC)"))
	}
	if hasQueue {
		out = append(out, reportedTiming(event.StageQueue, queue, st.Source))
	}
	if hasPrefill {
		out = append(out, reportedTiming(event.StagePrefill, prefill, withNotes(st.Source, "prefill includes first decode", cached)))
	}
	return out
}

// ollamaStages maps Ollama's final chunk. Its load_duration runs from the
// handler to a loaded runner: it holds the scheduler queue and any model
// load.
func ollamaStages(st *event.ServerTiming, cached string) []event.StageTiming {
	var out []event.StageTiming
	load, hasLoad := timingOf(st, stageLoad)
	if !hasLoad {
		load, hasLoad = timingOf(st, event.StageQueue)
	}
	if hasLoad {
		out = append(out, reportedTiming(event.StageQueue, load, st.Source+" (load_duration: queue wait and model load)"))
	}
	if d, ok := timingOf(st, event.StagePrefill); ok {
		out = append(out, reportedTiming(event.StagePrefill, d, withNotes(st.Source, "prompt_eval", cached)))
	}
	return out
}

// tgiStages maps TGI's validation (which includes tokenization) and queue.
func tgiStages(st *event.ServerTiming) []event.StageTiming {
	var out []event.StageTiming
	if d, ok := timingOf(st, event.StageTokenize); ok {
		out = append(out, reportedTiming(event.StageTokenize, d, st.Source+" (validation, includes tokenization)"))
	}
	if d, ok := timingOf(st, event.StageQueue); ok {
		out = append(out, reportedTiming(event.StageQueue, d, st.Source))
	}
	return out
}

// breakdownStages maps llama.cpp (prefill only), the simulator's truth and
// any source that already speaks in breakdown stages: one to one.
func breakdownStages(st *event.ServerTiming, cached string) []event.StageTiming {
	var out []event.StageTiming
	for _, s := range serverBreakdownOrder {
		if d, ok := timingOf(st, s); ok {
			src := st.Source
			if s == event.StagePrefill {
				src = withNotes(src, cached)
			}
			out = append(out, reportedTiming(s, d, src))
		}
	}
	return out
}

// intervalEstimates turns an interval's stage means into estimates for one
// request: an interval mean is not this request's number. Only per-request
// means are used (never a key ending in event.PerTokenSuffix). No frontend stage
// is derived from vLLM's TTFT mean less its queue and prefill means: those
// histograms observe different requests in one interval (TTFT at the first
// token, the others at the end), and the difference is mostly noise.
func intervalEstimates(s *event.ServerSample, cached string) intervalEstimate {
	var est intervalEstimate
	if s == nil {
		return est
	}
	mean := func(stage event.Stage) (time.Duration, bool) {
		h, ok := s.Stages[string(stage)]
		return h.Mean, ok && h.Count > 0 && h.Mean >= 0
	}
	vllm := strings.HasPrefix(s.Dialect, "vllm")
	if d, ok := mean(event.StagePrefill); ok {
		note := ""
		if vllm {
			note = "prefill includes first decode"
		}
		est.means = append(est.means, stageMean{stage: event.StagePrefill, mean: d, notes: []string{note, cached}})
	}
	if d, ok := mean(event.StageTokenize); ok {
		est.means = append(est.means, stageMean{stage: event.StageTokenize, mean: d})
	}
	if h, ok := s.Stages[string(event.StageQueue)]; ok && h.Count > 0 && h.Mean >= 0 {
		est.hasQueue = true
		est.queueLimit, est.limitWhat = plausibleQueue(s)
	}
	return est
}

// hasIntervalEstimates reports whether s offers any estimate.
func hasIntervalEstimates(s *event.ServerSample) bool {
	est := intervalEstimates(s, "")
	return len(est.means) > 0 || est.hasQueue
}
