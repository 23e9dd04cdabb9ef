package collector

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/latscope/latscope/event"
)

// SpanLookup finds the server's own timing of one request by its request id
// or its trace id. OTLPReceiver is one.
type SpanLookup interface {
	Lookup(requestID, traceID string) (*event.ServerTiming, bool)
}

// Attributor defaults.
const (
	DefaultJoinWait   = 2 * time.Second
	DefaultMaxPending = 16384
	maxTargets        = 1024 // bound on the per-target RTT memory
)

// Sources of the estimates the attributor adds.
const (
	SourceConnectRTT      = "connect_rtt"
	SourceMetricsInterval = "metrics.interval"
	SourceResidual        = "residual"
)

// AttributorConfig configures an Attributor.
type AttributorConfig struct {
	// Spans finds per-request server spans; nil when no receiver runs.
	Spans SpanLookup
	// JoinWait is how long a finished request is held for its span. Zero
	// means DefaultJoinWait when Spans is set; negative means look once and
	// never hold. Servers export spans in batches (vLLM's OpenTelemetry SDK
	// waits up to OTEL_BSP_SCHEDULE_DELAY, 5 s by default), so lower that on
	// the server or raise this.
	JoinWait time.Duration
	// Now is the clock for JoinWait deadlines; time.Now when nil.
	Now func() time.Time
	// MaxPending bounds the held requests; past it the oldest is released
	// without its span. DefaultMaxPending when zero.
	MaxPending int
	// Poll is how often held requests look for their span; derived from
	// JoinWait when zero.
	Poll time.Duration
}

// AttributorStats counts the attributor's work.
type AttributorStats struct {
	Attributed   uint64 // OK requests given a breakdown
	FromRecord   uint64 // server timing from the request's own record
	FromSpan     uint64 // server timing joined from a span
	FromInterval uint64 // only interval means available (estimated)
	NoServer     uint64 // no server data at all
	Expired      uint64 // held for JoinWait and released without a span
	Dropped      uint64 // not delivered because the consumer stopped reading after ctx ended
}

// Attributor is the pipeline stage between the sources and the aggregator:
// it fills Request.Breakdown, joining each request with the best server data
// there is for it. One goroutine (Run) owns all of its state.
type Attributor struct {
	cfg AttributorConfig

	attributed, fromRecord, fromSpan, fromInterval, noServer, expired, dropped atomic.Uint64
}

// NewAttributor returns an Attributor with cfg's defaults filled in.
func NewAttributor(cfg AttributorConfig) *Attributor {
	switch {
	case cfg.Spans == nil:
		cfg.JoinWait = 0
	case cfg.JoinWait == 0:
		cfg.JoinWait = DefaultJoinWait
	case cfg.JoinWait < 0:
		cfg.JoinWait = 0
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.Poll <= 0 {
		cfg.Poll = min(max(cfg.JoinWait/20, 2*time.Millisecond), 20*time.Millisecond)
	}
	return &Attributor{cfg: cfg}
}

// Stats returns the attributor's counters; safe to call while Run runs.
func (a *Attributor) Stats() AttributorStats {
	return AttributorStats{
		Attributed:   a.attributed.Load(),
		FromRecord:   a.fromRecord.Load(),
		FromSpan:     a.fromSpan.Load(),
		FromInterval: a.fromInterval.Load(),
		NoServer:     a.noServer.Load(),
		Expired:      a.expired.Load(),
		Dropped:      a.dropped.Load(),
	}
}

// heldRequest is a finished request waiting for its span.
type heldRequest struct {
	ev       event.Event
	deadline time.Time
	rtt      time.Duration
}

// attributorState is owned by the Run goroutine.
type attributorState struct {
	interval *event.ServerSample      // latest server sample with stage statistics
	lastRTT  map[string]time.Duration // per target: the last connect RTT seen
	pending  []heldRequest            // arrival order, which is also deadline order
}

// shutdownGrace bounds how long Run keeps offering events to a consumer that
// has stopped reading once ctx has ended.
const shutdownGrace = time.Second

// Run reads events from in and writes them to out until in is closed and
// every held request is released, or until ctx ends. Non-request events and
// requests that need no wait pass straight through; a request waiting for its
// span goes out as soon as the span is found or JoinWait has passed, so
// requests may leave in a different order than they came (each carries its
// own timestamps). When in closes, held requests keep the rest of their
// JoinWait; when ctx ends they are released at once with what is known. Run
// closes out before it returns.
func (a *Attributor) Run(ctx context.Context, in <-chan event.Event, out chan<- event.Event) {
	defer close(out)
	st := &attributorState{lastRTT: map[string]time.Duration{}}
	ticker := time.NewTicker(a.cfg.Poll)
	defer ticker.Stop()

	var outbox []event.Event
	for in != nil || len(st.pending) > 0 {
		var tick <-chan time.Time
		if len(st.pending) > 0 {
			tick = ticker.C
		}
		select {
		case <-ctx.Done():
			a.shutdown(st, out, outbox)
			return
		case ev, ok := <-in:
			if !ok {
				in = nil
				continue
			}
			outbox = a.accept(st, ev, outbox)
		case <-tick:
			outbox = a.poll(st, outbox, false)
		}
		for i, ev := range outbox {
			select {
			case out <- ev:
			case <-ctx.Done():
				a.shutdown(st, out, outbox[i:])
				return
			}
		}
		outbox = outbox[:0]
	}
}

// accept handles one incoming event, appending what is ready to go out.
func (a *Attributor) accept(st *attributorState, ev event.Event, ready []event.Event) []event.Event {
	if ev.Server != nil && len(ev.Server.Stages) > 0 {
		st.interval = ev.Server
	}
	r := ev.Request
	if r == nil {
		return append(ready, ev)
	}
	rtt := st.rttFor(r)
	if !r.OK() || len(r.Breakdown) > 0 {
		return append(ready, ev) // failed, or attributed already (a replay)
	}
	if r.Server == nil && a.cfg.Spans != nil {
		if timing, ok := a.cfg.Spans.Lookup(r.ID, r.TraceID); ok {
			r.Server = timing
			a.fromSpan.Add(1)
		} else if a.cfg.JoinWait > 0 && (r.ID != "" || r.TraceID != "") {
			st.pending = append(st.pending, heldRequest{ev: ev, deadline: a.cfg.Now().Add(a.cfg.JoinWait), rtt: rtt})
			if len(st.pending) > a.cfg.MaxPending {
				h := st.pending[0]
				st.pending = st.pending[1:]
				a.expired.Add(1)
				ready = append(ready, a.finish(st, h.ev, h.rtt))
			}
			return ready
		}
	} else if r.Server != nil {
		a.fromRecord.Add(1)
	}
	return append(ready, a.finish(st, ev, rtt))
}

// poll looks up the span of every held request and releases those found and
// those past their deadline (all of them when force is set).
func (a *Attributor) poll(st *attributorState, ready []event.Event, force bool) []event.Event {
	now := a.cfg.Now()
	kept := st.pending[:0]
	for _, h := range st.pending {
		r := h.ev.Request
		if timing, ok := a.cfg.Spans.Lookup(r.ID, r.TraceID); ok {
			r.Server = timing
			a.fromSpan.Add(1)
			ready = append(ready, a.finish(st, h.ev, h.rtt))
			continue
		}
		if force || !now.Before(h.deadline) {
			a.expired.Add(1)
			ready = append(ready, a.finish(st, h.ev, h.rtt))
			continue
		}
		kept = append(kept, h)
	}
	clear(st.pending[len(kept):])
	st.pending = kept
	return ready
}

// finish fills the breakdown of an OK request.
func (a *Attributor) finish(st *attributorState, ev event.Event, rtt time.Duration) event.Event {
	r := ev.Request
	switch {
	case r.Server != nil && len(serverStages(r.Server)) > 0:
	case len(intervalStages(st.interval)) > 0:
		a.fromInterval.Add(1)
	default:
		a.noServer.Add(1)
	}
	r.Breakdown = Attribute(r, r.Server, st.interval, rtt)
	a.attributed.Add(1)
	return ev
}

// shutdown releases every held request and offers the outbox to out for at
// most shutdownGrace, counting what the consumer did not take.
func (a *Attributor) shutdown(st *attributorState, out chan<- event.Event, outbox []event.Event) {
	outbox = a.poll(st, outbox, true)
	grace := time.NewTimer(shutdownGrace)
	defer grace.Stop()
	for i, ev := range outbox {
		select {
		case out <- ev:
		case <-grace.C:
			a.dropped.Add(uint64(len(outbox) - i))
			return
		}
	}
}

// rttFor records r's connect RTT for its target and returns the RTT to use
// for r: its own, or the last one seen on the target when it reused a
// connection.
func (st *attributorState) rttFor(r *event.Request) time.Duration {
	if r.ConnectRTT > 0 {
		if _, known := st.lastRTT[r.Target]; !known && len(st.lastRTT) >= maxTargets {
			clear(st.lastRTT) // many targets: forget, rather than grow without bound
		}
		st.lastRTT[r.Target] = r.ConnectRTT
		return r.ConnectRTT
	}
	return st.lastRTT[r.Target]
}

// Attribute splits r's TTFT into the breakdown stages, in order: the client
// stages before the server (measured, copied from r.Stages), network_out
// (estimated, half of rtt), the server stages from the best source for this
// request (st, server-reported; else interval's means, estimated), then
// network_return (estimated, the other half of rtt) and unattributed, which
// is TTFT minus everything else. The durations always add up exactly to
// r.TTFT. rtt is the connect RTT to use (zero: no network estimate).
//
// When the stages do not fit the server window (TTFT minus the client
// stages before it, i.e. wait_headers + first_token):
//  1. the network estimates are dropped first;
//  2. if the server's own numbers for this request still exceed the window,
//     they are kept and unattributed goes negative, with a note in its
//     Source: the server's clock or definitions disagree with the client's,
//     and hiding that would be wrong;
//  3. interval means that alone exceed the window are dropped instead (before
//     step 1), because they are not this request's numbers and a negative
//     residual would then say nothing about this request.
//
// Every dropped estimate is named in unattributed's Source.
//
// Nothing is ever spread over other stages.
func Attribute(r *event.Request, st *event.ServerTiming, interval *event.ServerSample, rtt time.Duration) []event.StageTiming {
	var out []event.StageTiming
	var pre time.Duration
	for _, s := range r.Stages {
		switch s.Stage {
		case event.StageWaitHeaders, event.StageFirstToken:
			continue
		}
		if s.Provenance == "" {
			s.Provenance = event.Measured
		}
		out = append(out, s)
		pre += s.Duration
	}
	window := r.TTFT - pre

	server, ownNumbers := serverStages(st), true
	if len(server) == 0 {
		server, ownNumbers = intervalStages(interval), false
	}
	serverSum := sumStages(server)

	var notes []string
	if !ownNumbers && serverSum > window {
		server, serverSum = nil, 0
		notes = append(notes, "interval means dropped: they exceed this request's server window")
	}
	var netOut, netReturn time.Duration
	if rtt > 0 {
		netOut = rtt / 2
		netReturn = rtt - netOut
		if serverSum+rtt > window {
			netOut, netReturn = 0, 0
			notes = append(notes, "network estimates dropped: they do not fit the server window")
		}
	}
	if serverSum > window && len(server) > 0 {
		notes = append(notes, "negative: server-reported stages exceed the client's server window (clocks or definitions disagree)")
	}

	if netOut > 0 {
		out = append(out, event.StageTiming{Stage: event.StageNetworkOut, Duration: netOut, Provenance: event.Estimated, Source: SourceConnectRTT})
	}
	out = append(out, server...)
	if netReturn > 0 {
		out = append(out, event.StageTiming{Stage: event.StageNetworkReturn, Duration: netReturn, Provenance: event.Estimated, Source: SourceConnectRTT})
	}
	rest := r.TTFT - sumStages(out)
	if rest < 0 && len(notes) == 0 {
		notes = append(notes, "negative: the client stages exceed the TTFT")
	}
	src := SourceResidual
	if len(notes) > 0 {
		src += "; " + strings.Join(notes, "; ")
	}
	return append(out, event.StageTiming{Stage: event.StageUnattributed, Duration: rest, Provenance: event.Estimated, Source: src})
}

func sumStages(stages []event.StageTiming) time.Duration {
	var sum time.Duration
	for _, s := range stages {
		sum += s.Duration
	}
	return sum
}

// serverBreakdownOrder is the order of the server stages in a breakdown.
var serverBreakdownOrder = []event.Stage{
	event.StageHTTP, event.StageTokenize, event.StageQueue,
	event.StagePrefill, event.StageFirstDecode, event.StageDetokenize,
}

// Known per-request sources (event.ServerTiming.Source), besides SourceOTLP
// and SourceOTLPTGI.
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
// source by what its fields really cover. All are ServerReported.
func serverStages(st *event.ServerTiming) []event.StageTiming {
	if st == nil || len(st.Stages) == 0 {
		return nil
	}
	get := func(s event.Stage) (time.Duration, bool) {
		d, ok := st.Stages[s]
		return d, ok && d >= 0
	}
	reported := func(s event.Stage, d time.Duration, src string) event.StageTiming {
		return event.StageTiming{Stage: s, Duration: d, Provenance: event.ServerReported, Source: src}
	}
	var out []event.StageTiming
	switch st.Source {
	case SourceOTLP, sourceVLLMMetrics:
		// vLLM: queue = scheduled - queued; "prefill" = first token -
		// scheduled, so it covers prefill and the first decode step; the
		// frontend TTFT (arrival → first token) minus both is the frontend's
		// own work. The metrics object's time_to_first_token_ms counts from
		// scheduling, so it is the prefill figure, not the frontend TTFT.
		queue, hasQueue := get(event.StageQueue)
		prefill, hasPrefill := get(event.StagePrefill)
		ttft, hasTTFT := get(event.StageServerTTFT)
		if st.Source == sourceVLLMMetrics && !hasPrefill && hasTTFT {
			prefill, hasPrefill, hasTTFT = ttft, true, false
		}
		if hasTTFT && hasQueue && hasPrefill && ttft-queue-prefill >= 0 {
			out = append(out, reported(event.StageTokenize, ttft-queue-prefill,
				st.Source+" (frontend: HTTP parsing, templating, tokenization, IPC)"))
		}
		if hasQueue {
			out = append(out, reported(event.StageQueue, queue, st.Source))
		}
		if hasPrefill {
			out = append(out, reported(event.StagePrefill, prefill, st.Source+" (prefill includes first decode)"))
		}
	case sourceOllama:
		// load_duration runs from the handler to a loaded runner: it holds
		// the scheduler queue and any model load.
		load, hasLoad := get(stageLoad)
		if !hasLoad {
			load, hasLoad = get(event.StageQueue)
		}
		if hasLoad {
			out = append(out, reported(event.StageQueue, load, st.Source+" (load_duration: queue wait and model load)"))
		}
		if d, ok := get(event.StagePrefill); ok {
			out = append(out, reported(event.StagePrefill, d, st.Source+" (prompt_eval)"))
		}
	case SourceOTLPTGI, sourceTGIHeaders:
		if d, ok := get(event.StageTokenize); ok {
			out = append(out, reported(event.StageTokenize, d, st.Source+" (validation, includes tokenization)"))
		}
		if d, ok := get(event.StageQueue); ok {
			out = append(out, reported(event.StageQueue, d, st.Source))
		}
	default:
		// llama.cpp (prefill only), the simulator's truth and any source that
		// already speaks in breakdown stages: one to one.
		for _, s := range serverBreakdownOrder {
			if d, ok := get(s); ok {
				out = append(out, reported(s, d, st.Source))
			}
		}
	}
	return out
}

// intervalStages turns the latest interval's stage means into estimates: an
// interval mean is not this request's number.
func intervalStages(s *event.ServerSample) []event.StageTiming {
	if s == nil {
		return nil
	}
	var out []event.StageTiming
	for _, stage := range []event.Stage{event.StageTokenize, event.StageQueue, event.StagePrefill} {
		h, ok := s.Stages[string(stage)]
		if !ok || h.Count <= 0 || h.Mean < 0 {
			continue
		}
		src := SourceMetricsInterval
		if stage == event.StagePrefill && strings.HasPrefix(s.Dialect, "vllm") {
			src += " (prefill includes first decode)"
		}
		out = append(out, event.StageTiming{Stage: stage, Duration: h.Mean, Provenance: event.Estimated, Source: src})
	}
	return out
}
