package collector

import (
	"strings"
	"time"

	"github.com/latscope/latscope/event"
)

// Sources of the estimates the attributor adds.
const (
	SourceConnectRTT      = "connect_rtt"
	SourceMetricsInterval = "metrics.interval"
	SourceResidual        = "residual"
)

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
