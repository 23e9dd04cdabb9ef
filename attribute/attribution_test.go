package attribute

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latscope/latscope/collector"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/promdialect"
	"github.com/latscope/latscope/sim"
)

const (
	us = time.Microsecond
	ms = time.Millisecond
)

// clientRequest is an OK request whose contiguous client stages add up to
// its TTFT: 0.36 ms before the server, a 35 ms server window.
func clientRequest() *event.Request {
	stages := []event.StageTiming{
		{Stage: event.StageSchedLag, Duration: 0, Provenance: event.Measured},
		{Stage: event.StageSerialize, Duration: 100 * us, Provenance: event.Measured},
		{Stage: event.StageDNS, Duration: 0, Provenance: event.Measured},
		{Stage: event.StageConnect, Duration: 200 * us, Provenance: event.Measured},
		{Stage: event.StageTLS, Duration: 0, Provenance: event.Measured},
		{Stage: event.StageConnWait, Duration: 10 * us, Provenance: event.Measured},
		{Stage: event.StageWrite, Duration: 50 * us, Provenance: event.Measured},
		{Stage: event.StageWaitHeaders, Duration: 30 * ms, Provenance: event.Measured},
		{Stage: event.StageFirstToken, Duration: 5 * ms, Provenance: event.Measured},
	}
	r := &event.Request{ID: "req-1", TraceID: "0af7651916cd43dd8448eb211c80319c", Target: "http://t", Outcome: event.OutcomeOK,
		Stages: stages, ConnectRTT: 200 * us}
	for _, s := range stages {
		r.TTFT += s.Duration
	}
	return r
}

// clientPart is the expected head of every breakdown of clientRequest.
func clientPart() []event.StageTiming {
	var out []event.StageTiming
	for _, s := range clientRequest().Stages {
		if s.Stage != event.StageWaitHeaders && s.Stage != event.StageFirstToken {
			out = append(out, s)
		}
	}
	return out
}

func est(s event.Stage, d time.Duration, src string) event.StageTiming {
	return event.StageTiming{Stage: s, Duration: d, Provenance: event.Estimated, Source: src}
}

func srv(s event.Stage, d time.Duration, src string) event.StageTiming {
	return event.StageTiming{Stage: s, Duration: d, Provenance: event.ServerReported, Source: src}
}

func netOut(d time.Duration) event.StageTiming {
	return est(event.StageNetworkOut, d, SourceConnectRTT)
}

func netBack(d time.Duration) event.StageTiming {
	return est(event.StageNetworkReturn, d, SourceConnectRTT)
}

func rest(d time.Duration, notes ...string) event.StageTiming {
	src := SourceResidual
	for _, n := range notes {
		src += "; " + n
	}
	return est(event.StageUnattributed, d, src)
}

func timing(source string, stages map[event.Stage]time.Duration) *event.ServerTiming {
	return &event.ServerTiming{Source: source, Stages: stages}
}

func vllmInterval() *event.ServerSample {
	return &event.ServerSample{Dialect: "vllm", Stages: map[string]event.HistStat{
		"queue":   {Count: 10, Mean: 3 * ms},
		"prefill": {Count: 10, Mean: 20 * ms},
		"ttft":    {Count: 10, Mean: 26 * ms},
		"decode":  {Count: 0, Mean: 0},
	}}
}

const (
	noteNetDropped         = "network estimates dropped: they do not fit the server window"
	noteNegative           = "negative: server-reported stages exceed the client's server window (clocks or definitions disagree)"
	notePrefillNothingLeft = "interval prefill mean dropped: nothing is left of this request's server window"
	noteQueueLimited       = "queue limited to what the interval makes plausible"
	srcIntervalPrefill     = "metrics.interval (prefill includes first decode)"
	srcLlamaSlot           = "wait_headers (llamacpp sends its headers when a slot takes the request; less the connect RTT; includes the server's HTTP parsing and tokenization; "
)

// queueFitSource is the Source of a queue fitted from the interval, taken
// as a queue because gauge showed requests waiting.
func queueFitSource(limit, gauge string) string {
	return "metrics.interval (fit: the rest of the server window, at most " + limit + "; " + noteWaiting(gauge) + ")"
}

// serverWaitSource is the Source of a server wait fitted from the interval.
func serverWaitSource(note string) string {
	return "metrics.interval (fit: the rest of the server window, front end and queue; " + note + ")"
}

// llamaSlotSource is the Source of llama.cpp's slot wait, with the gauge's note.
func llamaSlotSource(note string) string { return srcLlamaSlot + note + ")" }

// windowRestSrc is the Source of restQueue's wait.
func windowRestSrc(lessRTT bool, note string) string {
	less := "prompt_ms"
	if lessRTT {
		less += " and the connect RTT"
	}
	return "server_window_rest (server window less " + less + ": any queue wait plus HTTP parsing, tokenization, the server loop's turn and framing the first token; " + note + ")"
}

func noteWaiting(gauge string) string {
	return "taken as queue: " + gauge + " showed requests waiting while this one was at the server"
}

// noteNoFloor and noteFloor say what a queue split from a server wait
// rests on: no earlier wait, or the floor of the recent ones.
const noteNoFloor = "no earlier request found the queue empty to tell the front end apart, so all of it"

func noteFloor(requests int, wait string) string {
	return fmt.Sprintf("the front end taken as the lowest server wait of the last %d requests that found no queue, %s", requests, wait)
}

func noteEmpty(gauge string) string {
	return "not a queue: " + gauge + " showed no request waiting while this one was at the server"
}

func noteUnknown(gauge string) string {
	return "front end and queue not told apart: no reading of " + gauge + " covers this request"
}

const (
	gaugeVLLM    = "vllm:num_requests_waiting"
	gaugeSGLang  = "sglang:num_queue_reqs"
	gaugeTRTLLM  = "trtllm_num_requests_waiting"
	gaugeLlama   = "llamacpp:requests_deferred"
	gaugeDefault = "the server's queue gauge"
)

// measured is a stage the client measured.
func measured(s event.Stage, d time.Duration, src string) event.StageTiming {
	return event.StageTiming{Stage: s, Duration: d, Provenance: event.Measured, Source: src}
}

// llamacppInterval is a llama.cpp sample: per-token means only.
func llamacppInterval() *event.ServerSample {
	return &event.ServerSample{Dialect: "llamacpp", Stages: map[string]event.HistStat{
		"prefill_per_token": {Count: 4096, Mean: 20 * us},
		"decode_per_token":  {Count: 512, Mean: 9 * ms},
	}}
}

// attributeCases are TestAttribute's cases.
var attributeCases = []struct {
	name     string
	st       *event.ServerTiming
	interval *event.ServerSample
	rtt      time.Duration
	samples  int                 // connect times the RTT rests on
	kind     string              // server kind
	ttft     time.Duration       // instead of the client stages' sum
	queue    QueueGauge          // what the queue gauge showed
	want     []event.StageTiming // after the client part
}{
	{
		name: "vllm span",
		st: timing(event.SourceOTLP, map[event.Stage]time.Duration{
			event.StageServerTTFT: 30 * ms, event.StageQueue: 5 * ms, event.StagePrefill: 20 * ms,
			event.StageDecode: 900 * ms, event.StageServerE2E: 1 * time.Second,
		}),
		interval: vllmInterval(), // per-request numbers win over interval means
		rtt:      200 * us,
		want: []event.StageTiming{
			netOut(100 * us),
			srv(event.StageTokenize, 5*ms, "otlp (frontend: HTTP parsing, templating, tokenization, IPC)"),
			srv(event.StageQueue, 5*ms, "otlp"),
			srv(event.StagePrefill, 20*ms, "otlp (prefill includes first decode)"),
			netBack(100 * us),
			rest(4800 * us),
		},
	},
	{
		name: "vllm span without its ttft",
		st:   timing(event.SourceOTLP, map[event.Stage]time.Duration{event.StageQueue: 5 * ms, event.StagePrefill: 20 * ms}),
		want: []event.StageTiming{
			srv(event.StageQueue, 5*ms, "otlp"),
			srv(event.StagePrefill, 20*ms, "otlp (prefill includes first decode)"),
			rest(10 * ms),
		},
	},
	{
		name: "vllm metrics object: ttft counts from scheduling",
		st:   timing("vllm.metrics", map[event.Stage]time.Duration{event.StageQueue: 1 * ms, event.StageServerTTFT: 22 * ms}),
		want: []event.StageTiming{
			srv(event.StageQueue, 1*ms, "vllm.metrics"),
			srv(event.StagePrefill, 22*ms, "vllm.metrics (prefill includes first decode)"),
			rest(12 * ms),
		},
	},
	{
		name: "llama.cpp timings: prefill only",
		st:   timing("llamacpp.timings", map[event.Stage]time.Duration{event.StagePrefill: 12 * ms, event.StageDecode: 300 * ms}),
		rtt:  1 * ms,
		want: []event.StageTiming{
			netOut(500 * us),
			est(event.StageServerWait, 22*ms, windowRestSrc(true, noteUnknown(gaugeDefault))),
			srv(event.StagePrefill, 12*ms, "llamacpp.timings"),
			netBack(500 * us),
			rest(0),
		},
	},
	{
		name: "ollama final object: load holds the queue",
		st:   timing("ollama.final", map[event.Stage]time.Duration{"load": 3 * ms, event.StagePrefill: 10 * ms, event.StageDecode: 200 * ms}),
		want: []event.StageTiming{
			srv(event.StageQueue, 3*ms, "ollama.final (load_duration: queue wait and model load)"),
			srv(event.StagePrefill, 10*ms, "ollama.final (prompt_eval)"),
			rest(22 * ms),
		},
	},
	{
		name: "tgi span: validation and queue",
		st: timing(event.SourceOTLPTGI, map[event.Stage]time.Duration{
			event.StageTokenize: 850 * us, event.StageQueue: 12 * ms, event.StageInference: 1 * time.Second,
		}),
		want: []event.StageTiming{
			srv(event.StageTokenize, 850*us, "otlp.tgi (validation, includes tokenization)"),
			srv(event.StageQueue, 12*ms, "otlp.tgi"),
			rest(22150 * us),
		},
	},
	{
		name: "simulator truth: one to one, in breakdown order",
		st: timing("sim.truth", map[event.Stage]time.Duration{
			event.StageDetokenize: 1 * ms, event.StageFirstDecode: 4 * ms, event.StagePrefill: 15 * ms,
			event.StageQueue: 6 * ms, event.StageTokenize: 2 * ms, event.StageHTTP: 1 * ms,
			event.StageDecode: 1 * time.Second,
		}),
		rtt: 2 * ms,
		want: []event.StageTiming{
			netOut(1 * ms),
			srv(event.StageHTTP, 1*ms, "sim.truth"),
			srv(event.StageTokenize, 2*ms, "sim.truth"),
			srv(event.StageQueue, 6*ms, "sim.truth"),
			srv(event.StagePrefill, 15*ms, "sim.truth"),
			srv(event.StageFirstDecode, 4*ms, "sim.truth"),
			srv(event.StageDetokenize, 1*ms, "sim.truth"),
			netBack(1 * ms),
			rest(4 * ms),
		},
	},
	{
		name:     "interval fallback is estimated: the prefill mean, the queue the rest",
		interval: vllmInterval(),
		rtt:      200 * us,
		queue:    QueueWaiting,
		want: []event.StageTiming{
			netOut(100 * us),
			// No percentiles: at most all of the interval's queue time.
			est(event.StageQueue, 14800*us, queueFitSource("the interval's queue total 30ms", gaugeVLLM)),
			est(event.StagePrefill, 20*ms, srcIntervalPrefill),
			netBack(100 * us),
			rest(0),
		},
	},
	{
		name: "interval: a request that did not queue while others did gets a small queue",
		interval: &event.ServerSample{Dialect: "vllm", Stages: map[string]event.HistStat{
			"queue": {Count: 8, Mean: 400 * ms, P50: 420 * ms, P90: 800 * ms, P99: 900 * ms}, "prefill": {Count: 8, Mean: 30 * ms},
		}},
		rtt:   200 * us,
		queue: QueueWaiting,
		want: []event.StageTiming{
			netOut(100 * us),
			est(event.StageQueue, 4800*us, queueFitSource("the interval's queue p99 900ms", gaugeVLLM)),
			est(event.StagePrefill, 30*ms, srcIntervalPrefill),
			netBack(100 * us),
			rest(0),
		},
	},
	{
		name: "interval: the queue is never more than the interval makes plausible",
		interval: &event.ServerSample{Dialect: "sglang", Stages: map[string]event.HistStat{
			"queue": {Count: 8, Mean: 10 * ms, P99: 20 * ms},
		}},
		queue: QueueWaiting,
		want: []event.StageTiming{
			est(event.StageQueue, 20*ms, queueFitSource("the interval's queue p99 20ms", gaugeSGLang)),
			rest(15*ms, noteQueueLimited),
		},
	},
	{
		name: "interval: nobody waiting, so no queue: the rest is a server wait",
		interval: &event.ServerSample{Dialect: "trtllm", Stages: map[string]event.HistStat{
			"queue": {Count: 5}, "prefill": {Count: 5, Mean: 25 * ms},
		}},
		queue: QueueEmpty,
		want: []event.StageTiming{
			est(event.StageServerWait, 10*ms, serverWaitSource(noteEmpty(gaugeTRTLLM))),
			est(event.StagePrefill, 25*ms, "metrics.interval"),
			rest(0),
		},
	},
	{
		name: "interval: no gauge reading, so no queue",
		interval: &event.ServerSample{Dialect: "vllm", Stages: map[string]event.HistStat{
			"queue": {Count: 5, Mean: 9 * ms}, "prefill": {Count: 5, Mean: 25 * ms},
		}},
		want: []event.StageTiming{
			est(event.StageServerWait, 10*ms, serverWaitSource(noteUnknown(gaugeVLLM))),
			est(event.StagePrefill, 25*ms, srcIntervalPrefill),
			rest(0),
		},
	},
	{
		name: "interval: a mean longer than the window is cut to it, and leaves no queue",
		interval: &event.ServerSample{Dialect: "vllm", Stages: map[string]event.HistStat{
			"queue": {Count: 3, Mean: 30 * ms, P99: 34 * ms}, "prefill": {Count: 3, Mean: 40 * ms},
		}},
		rtt:   200 * us,
		queue: QueueWaiting,
		want: []event.StageTiming{
			netOut(100 * us),
			est(event.StageQueue, 0, queueFitSource("the interval's queue p99 34ms", gaugeVLLM)),
			est(event.StagePrefill, 34800*us, "metrics.interval (prefill includes first decode; the mean cut to what is left of this request's server window)"),
			netBack(100 * us),
			rest(0),
		},
	},
	{
		name: "interval: the TTFT p99 bounds the queue when it is the larger",
		interval: &event.ServerSample{Dialect: "vllm", Stages: map[string]event.HistStat{
			"queue": {Count: 3, Mean: 2 * ms, P99: 3 * ms}, "ttft": {Count: 5, Mean: 20 * ms, P99: 25 * ms},
		}},
		queue: QueueWaiting,
		want: []event.StageTiming{
			est(event.StageQueue, 25*ms, queueFitSource("the interval's TTFT p99 25ms", gaugeVLLM)),
			rest(10*ms, noteQueueLimited),
		},
	},
	{
		name: "interval: client stages that exceed the TTFT leave nothing to fit",
		interval: &event.ServerSample{Dialect: "vllm", Stages: map[string]event.HistStat{
			"queue": {Count: 3, Mean: 2 * ms, P99: 3 * ms}, "prefill": {Count: 3, Mean: 20 * ms},
		}},
		ttft:  300 * us,
		queue: QueueWaiting,
		want: []event.StageTiming{
			est(event.StageQueue, 0, queueFitSource("the interval's queue p99 3ms", gaugeVLLM)),
			rest(-60*us, notePrefillNothingLeft, "negative: the client stages exceed the TTFT"),
		},
	},
	{
		name:     "interval: per-token means are never stages",
		interval: llamacppInterval(),
		want:     []event.StageTiming{rest(35 * ms)},
	},
	{
		name:    "network estimate says what it rests on",
		rtt:     100 * us,
		samples: 12,
		want: []event.StageTiming{
			est(event.StageNetworkOut, 50*us, "connect_rtt (min of 12)"),
			est(event.StageNetworkReturn, 50*us, "connect_rtt (min of 12)"),
			rest(34900 * us),
		},
	},
	{
		name: "llama.cpp: the slot wait is wait_headers less the round trip",
		st:   timing("llamacpp.timings", map[event.Stage]time.Duration{event.StagePrefill: 4 * ms, event.StageDecode: 300 * ms}),
		rtt:  200 * us,
		kind: "llamacpp",
		want: []event.StageTiming{
			netOut(100 * us),
			measured(event.StageServerWait, 29800*us, llamaSlotSource(noteUnknown(gaugeDefault))),
			srv(event.StagePrefill, 4*ms, "llamacpp.timings"),
			netBack(100 * us),
			rest(1 * ms),
		},
	},
	{
		name:     "llama.cpp without timings: the slot wait, and no per-token mean as prefill",
		interval: llamacppInterval(),
		rtt:      200 * us,
		kind:     "llamacpp",
		want: []event.StageTiming{
			netOut(100 * us),
			measured(event.StageServerWait, 29800*us, llamaSlotSource(noteUnknown(gaugeLlama))),
			netBack(100 * us),
			rest(5 * ms),
		},
	},
	{
		name: "llama.cpp whose prefill does not fit after the headers: no slot wait claimed",
		st:   timing("llamacpp.timings", map[event.Stage]time.Duration{event.StagePrefill: 12 * ms}),
		kind: "llamacpp",
		want: []event.StageTiming{
			est(event.StageServerWait, 23*ms, windowRestSrc(false, noteUnknown(gaugeDefault))),
			srv(event.StagePrefill, 12*ms, "llamacpp.timings"),
			rest(0),
		},
	},
	{
		name: "vllm: headers at once, so wait_headers is no queue",
		kind: "vllm",
		want: []event.StageTiming{rest(35 * ms)},
	},
	{
		name: "per-request queue wins over the slot wait",
		st:   timing(event.SourceOTLPTGI, map[event.Stage]time.Duration{event.StageQueue: 12 * ms}),
		kind: "llamacpp",
		want: []event.StageTiming{
			srv(event.StageQueue, 12*ms, "otlp.tgi"),
			rest(23 * ms),
		},
	},
	{
		name: "cached prompt tokens are named on the prefill",
		st: &event.ServerTiming{Source: "llamacpp.timings", PromptTokens: 512, CachedTokens: 448,
			Stages: map[event.Stage]time.Duration{event.StagePrefill: 3 * ms}},
		want: []event.StageTiming{
			est(event.StageServerWait, 32*ms, windowRestSrc(false, noteUnknown(gaugeDefault))),
			srv(event.StagePrefill, 3*ms, "llamacpp.timings (448 of 512 prompt tokens cached)"),
			rest(0),
		},
	},
	{
		name: "cached prompt tokens are named on an interval prefill too",
		st:   &event.ServerTiming{Source: "usage", CachedTokens: 100},
		interval: &event.ServerSample{Dialect: "vllm", Stages: map[string]event.HistStat{
			"prefill": {Count: 3, Mean: 10 * ms},
		}},
		want: []event.StageTiming{
			est(event.StageServerWait, 25*ms, serverWaitSource(noteUnknown(gaugeVLLM))),
			est(event.StagePrefill, 10*ms, "metrics.interval (prefill includes first decode; 100 prompt tokens cached)"),
			rest(0),
		},
	},
	{
		name:     "server timing with no usable stage falls back to the interval",
		st:       timing(event.SourceOTLP, map[event.Stage]time.Duration{event.StageDecode: 1 * time.Second}),
		interval: &event.ServerSample{Dialect: "sglang", Stages: map[string]event.HistStat{"prefill": {Count: 2, Mean: 7 * ms}}},
		want: []event.StageTiming{
			est(event.StageServerWait, 28*ms, serverWaitSource(noteUnknown(gaugeSGLang))),
			est(event.StagePrefill, 7*ms, "metrics.interval"), rest(0),
		},
	},
	{
		name: "nothing available",
		want: []event.StageTiming{rest(35 * ms)},
	},
	{
		name: "nothing but the network estimate",
		rtt:  3 * ms,
		want: []event.StageTiming{netOut(1500 * us), netBack(1500 * us), rest(32 * ms)},
	},
	{
		name: "over: the network estimate goes first",
		st:   timing("llamacpp.timings", map[event.Stage]time.Duration{event.StagePrefill: 34900 * us}),
		rtt:  200 * us,
		want: []event.StageTiming{
			est(event.StageServerWait, 100*us, windowRestSrc(false, noteUnknown(gaugeDefault))),
			srv(event.StagePrefill, 34900*us, "llamacpp.timings"),
			rest(0, noteNetDropped),
		},
	},
	{
		name: "over: server numbers kept, unattributed negative",
		st:   timing(event.SourceOTLP, map[event.Stage]time.Duration{event.StageQueue: 10 * ms, event.StagePrefill: 30 * ms}),
		rtt:  200 * us,
		want: []event.StageTiming{
			srv(event.StageQueue, 10*ms, "otlp"),
			srv(event.StagePrefill, 30*ms, "otlp (prefill includes first decode)"),
			rest(-5*ms, noteNetDropped, noteNegative),
		},
	},
}

func TestAttribute(t *testing.T) {
	t.Parallel()
	cases := attributeCases
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := clientRequest()
			if tc.ttft != 0 {
				r.TTFT = tc.ttft
			}
			got := Attribute(r, AttributionInput{Server: tc.st, Interval: tc.interval,
				Network: NetworkEstimate{RTT: tc.rtt, Samples: tc.samples}, ServerKind: tc.kind, Queue: tc.queue})
			want := append(clientPart(), tc.want...)
			if len(got) != len(want) {
				t.Fatalf("got %d stages, want %d:\n got %v\nwant %v", len(got), len(want), got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("stage %d = %+v, want %+v", i, got[i], want[i])
				}
			}
			checkSum(t, r, got)
		})
	}
}

// TestAttributeClientStagesOnly covers a request whose probe recorded no
// stages: the whole TTFT is unattributed.
func TestAttributeClientStagesOnly(t *testing.T) {
	t.Parallel()
	r := &event.Request{Outcome: event.OutcomeOK, TTFT: 7 * ms}
	got := Attribute(r, AttributionInput{})
	if len(got) != 1 || got[0] != rest(7*ms) {
		t.Errorf("breakdown = %v, want only unattributed 7ms", got)
	}
}

func checkSum(t testing.TB, r *event.Request, breakdown []event.StageTiming) {
	t.Helper()
	if len(breakdown) == 0 || breakdown[len(breakdown)-1].Stage != event.StageUnattributed {
		t.Fatalf("breakdown does not end with unattributed: %v", breakdown)
	}
	var sum time.Duration
	for _, s := range breakdown {
		sum += s.Duration
		isClient := false
		for _, c := range r.Stages {
			if c.Stage == s.Stage {
				isClient = true
			}
		}
		slotWait := s.Stage == event.StageServerWait && strings.HasPrefix(s.Source, SourceWaitHeaders)
		if s.Provenance == event.Measured && !isClient && !slotWait {
			t.Fatalf("%s presented as measured: %v", s.Stage, breakdown)
		}
	}
	if sum != r.TTFT {
		t.Fatalf("breakdown sums to %v, TTFT is %v: %v", sum, r.TTFT, breakdown)
	}
}

// randomInputs builds a request and what Attribute joins onto it from rng,
// including the odd values (negative, zero, huge) a broken source may send.
func randomInputs(rng *rand.Rand) (*event.Request, AttributionInput) {
	dur := func() time.Duration {
		switch rng.IntN(8) {
		case 0:
			return 0
		case 1:
			return -time.Duration(rng.Int64N(int64(time.Second)))
		case 2:
			return time.Duration(rng.Int64())
		default:
			return time.Duration(rng.Int64N(int64(100 * ms)))
		}
	}
	r := &event.Request{Outcome: event.OutcomeOK, ConnectRTT: dur()}
	clientStages := []event.Stage{event.StageSchedLag, event.StageSerialize, event.StageDNS, event.StageConnect,
		event.StageTLS, event.StageConnWait, event.StageWrite, event.StageWaitHeaders, event.StageFirstToken}
	for _, s := range clientStages {
		if rng.IntN(5) > 0 {
			d := dur()
			r.Stages = append(r.Stages, event.StageTiming{Stage: s, Duration: d, Provenance: event.Measured})
			r.TTFT += d
		}
	}
	if rng.IntN(4) == 0 {
		r.TTFT += dur() // stages that do not add up
	}
	var st *event.ServerTiming
	if rng.IntN(3) > 0 {
		sources := []string{event.SourceOTLP, event.SourceOTLPTGI, "vllm.metrics", "llamacpp.timings", "ollama.final", "tgi.headers", "sim.truth", "other"}
		st = &event.ServerTiming{Source: sources[rng.IntN(len(sources))], Stages: map[event.Stage]time.Duration{},
			PromptTokens: rng.IntN(3) * 512, CachedTokens: rng.IntN(3) * 300}
		for _, s := range []event.Stage{event.StageHTTP, event.StageTokenize, event.StageQueue, event.StagePrefill,
			event.StageFirstDecode, event.StageDetokenize, event.StageServerTTFT, event.StageDecode, "load"} {
			if rng.IntN(2) == 0 {
				st.Stages[s] = dur()
			}
		}
	}
	var interval *event.ServerSample
	if rng.IntN(2) == 0 {
		dialects := []string{"vllm", "sglang", "llamacpp", "triton"}
		interval = &event.ServerSample{Dialect: dialects[rng.IntN(len(dialects))], Stages: map[string]event.HistStat{}}
		for _, s := range []string{"tokenize", "queue", "prefill", "ttft", "prefill_per_token"} {
			if rng.IntN(2) == 0 {
				interval.Stages[s] = event.HistStat{Count: float64(rng.IntN(3)), Mean: dur(), P99: dur()}
			}
		}
	}
	kinds := []string{"", "llamacpp", "vllm", "latscope-sim"}
	return r, AttributionInput{Server: st, Interval: interval,
		Network: NetworkEstimate{RTT: dur(), Samples: rng.IntN(20)}, ServerKind: kinds[rng.IntN(len(kinds))],
		Queue: QueueGauge(rng.IntN(3))}
}

func TestAttributeSumsToTTFT(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		r, in := randomInputs(rng)
		checkSum(t, r, Attribute(r, in))
	}
}

func FuzzAttribute(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Add(uint64(0), uint64(0))
	f.Add(uint64(1<<63), uint64(42))
	f.Fuzz(func(t *testing.T, a, b uint64) {
		r, in := randomInputs(rand.New(rand.NewPCG(a, b)))
		checkSum(t, r, Attribute(r, in))
	})
}

func spanFor() *event.ServerTiming {
	return timing(event.SourceOTLP, map[event.Stage]time.Duration{event.StageServerTTFT: 30 * ms, event.StageQueue: 5 * ms, event.StagePrefill: 20 * ms})
}

// spanEvent is the server's span for request id, as a receiver emits it.
func spanEvent(id string) event.Event {
	return event.NewSpan(&event.Span{RequestID: id, Timing: *spanFor()})
}

// fakeClock is a settable clock for deadline and TTL tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func requestEvent(id string) event.Event {
	r := clientRequest()
	r.ID, r.TraceID = id, ""
	return event.NewRequest(r)
}

// pipeline runs an attributor over fresh channels and tears it down at the
// end of the test, checking that Run returned.
type attributorRig struct {
	in   chan event.Event
	out  chan event.Event
	done chan struct{}
	stop context.CancelFunc
	a    *Attributor
}

func startPipeline(t *testing.T, cfg AttributorConfig) *attributorRig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &attributorRig{in: make(chan event.Event), out: make(chan event.Event, 64), done: make(chan struct{}), stop: cancel, a: NewAttributor(cfg)}
	go func() {
		defer close(p.done)
		p.a.Run(ctx, p.in, p.out)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
	return p
}

func (p *attributorRig) send(t *testing.T, ev event.Event) {
	t.Helper()
	select {
	case p.in <- ev:
	case <-time.After(10 * time.Second):
		t.Fatal("attributor does not read its input")
	}
}

func (p *attributorRig) next(t *testing.T) event.Event {
	t.Helper()
	select {
	case ev, ok := <-p.out:
		if !ok {
			t.Fatal("out closed early")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event out")
	}
	return event.Event{}
}

// nothingOut checks that no event is waiting on out right now.
func (p *attributorRig) nothingOut(t *testing.T) {
	t.Helper()
	select {
	case ev := <-p.out:
		t.Fatalf("unexpected event out: %+v", ev)
	default:
	}
}

func hasStage(r *event.Request, s event.Stage, prov event.Provenance) bool {
	for _, b := range r.Breakdown {
		if b.Stage == s && b.Provenance == prov {
			return true
		}
	}
	return false
}

// barrier sends a marker through and waits for it, so everything sent
// before it has been taken by the attributor.
func (p *attributorRig) barrier(t *testing.T) {
	t.Helper()
	p.send(t, event.NewMarker(&event.Marker{Message: "barrier"}))
	for {
		if ev := p.next(t); ev.Marker != nil && ev.Marker.Message == "barrier" {
			return
		}
	}
}

func TestAttributorHoldsUntilSpan(t *testing.T) {
	t.Parallel()
	p := startPipeline(t, AttributorConfig{JoinSpans: true, JoinWait: time.Hour})

	p.send(t, requestEvent("late"))
	// Other events pass while the request is held.
	p.barrier(t)
	p.send(t, spanEvent("late"))
	got := p.next(t).Request
	if got == nil || got.ID != "late" {
		t.Fatalf("out = %+v, want request late", got)
	}
	if got.Server == nil || got.Server.Source != event.SourceOTLP {
		t.Errorf("joined request's Server = %+v, want the span", got.Server)
	}
	if !hasStage(got, event.StageQueue, event.ServerReported) || !hasStage(got, event.StageTokenize, event.ServerReported) {
		t.Errorf("breakdown lacks the span's stages: %v", got.Breakdown)
	}
	checkSum(t, got, got.Breakdown)
	if s := p.a.Stats(); s.FromSpan != 1 || s.Expired != 0 || s.Attributed != 1 || s.Spans != 1 {
		t.Errorf("stats = %+v", s)
	}
}

func TestAttributorJoinsByVLLMRequestIDAndTraceID(t *testing.T) {
	t.Parallel()
	p := startPipeline(t, AttributorConfig{JoinSpans: true, JoinWait: time.Hour})
	// vLLM names the engine request "chatcmpl-<X-Request-Id>"; the span
	// arrives first and waits for its request.
	p.send(t, event.NewSpan(&event.Span{RequestID: "chatcmpl-abc", Timing: *spanFor()}))
	p.send(t, requestEvent("abc"))
	if got := p.next(t).Request; got.ID != "abc" || got.Server == nil {
		t.Fatalf("out = %+v, want abc joined by its X-Request-Id", got)
	}
	byTrace := requestEvent("no-such-id")
	byTrace.Request.TraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	p.send(t, byTrace)
	p.send(t, event.NewSpan(&event.Span{TraceID: "4BF92F3577B34DA6A3CE929D0E0E4736", Timing: *spanFor()}))
	if got := p.next(t).Request; got.ID != "no-such-id" || got.Server == nil {
		t.Fatalf("out = %+v, want the request joined by trace id", got)
	}
}

func TestAttributorReleasesAfterJoinWait(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Unix(1767000000, 0)}
	p := startPipeline(t, AttributorConfig{JoinSpans: true, JoinWait: 2 * time.Second, Now: clock.Now, Poll: time.Millisecond})
	p.send(t, event.NewServer(vllmInterval()))
	if got := p.next(t); got.Server == nil {
		t.Fatalf("out = %+v, want the server sample", got)
	}
	p.send(t, requestEvent("never"))
	p.barrier(t) // the request is held, its deadline taken from the clock
	p.nothingOut(t)
	clock.Add(2 * time.Second)
	var got *event.Request
	for got == nil {
		ev := p.next(t)
		if ev.Request != nil {
			got = ev.Request
		}
	}
	if got.ID != "never" || got.Server != nil {
		t.Fatalf("out = %+v, want request never without a span", got)
	}
	if !hasStage(got, event.StagePrefill, event.Estimated) || hasStage(got, event.StagePrefill, event.ServerReported) {
		t.Errorf("breakdown should fall back to interval estimates: %v", got.Breakdown)
	}
	checkSum(t, got, got.Breakdown)
	if s := p.a.Stats(); s.Expired != 1 || s.FromInterval != 1 {
		t.Errorf("stats = %+v, want 1 expired, 1 from interval", s)
	}
	// The first expiry is reported, so a user learns spans are not arriving.
	if ev := p.next(t); ev.Marker == nil || !strings.Contains(ev.Marker.Message, "no server span") {
		t.Errorf("after an expiry got %+v, want a collector marker saying spans are missing", ev)
	}
}

func TestAttributorOrder(t *testing.T) {
	t.Parallel()
	t.Run("no wait keeps input order", func(t *testing.T) {
		t.Parallel()
		p := startPipeline(t, AttributorConfig{}) // no span source: nothing is held
		var want []string
		go func() {
			for i := range 50 {
				id := string(rune('a' + i%26))
				if i%5 == 0 {
					p.in <- event.NewGPU(&event.GPUSample{Reason: id})
				} else {
					p.in <- requestEvent(id)
				}
			}
		}()
		for i := range 50 {
			want = append(want, string(rune('a'+i%26)))
		}
		for i, w := range want {
			ev := p.next(t)
			got := ""
			if ev.Request != nil {
				got = ev.Request.ID
			} else {
				got = ev.GPU.Reason
			}
			if got != w {
				t.Fatalf("event %d = %q, want %q", i, got, w)
			}
		}
	})
	t.Run("a joined request does not wait behind a held one", func(t *testing.T) {
		t.Parallel()
		p := startPipeline(t, AttributorConfig{JoinSpans: true, JoinWait: time.Hour})
		p.send(t, spanEvent("b"))
		p.send(t, requestEvent("a"))
		p.send(t, requestEvent("b"))
		p.send(t, requestEvent("c"))
		if got := p.next(t).Request.ID; got != "b" {
			t.Fatalf("first out = %q, want b (its span was there)", got)
		}
		p.send(t, spanEvent("c"))
		if got := p.next(t).Request.ID; got != "c" {
			t.Errorf("second out = %q, want c", got)
		}
		p.send(t, spanEvent("a"))
		if got := p.next(t).Request.ID; got != "a" {
			t.Errorf("third out = %q, want a", got)
		}
	})
}

func TestAttributorSettle(t *testing.T) {
	t.Parallel()
	in, out := make(chan event.Event, 8), make(chan event.Event, 8)
	a := NewAttributor(AttributorConfig{JoinSpans: true, JoinWait: time.Hour})
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Run(context.Background(), in, out)
	}()
	// Nothing held: Settle returns at once.
	a.Settle(context.Background())
	// A request still in in's buffer when Settle is asked for counts as held.
	in <- requestEvent("r")
	settled := make(chan struct{})
	go func() {
		a.Settle(context.Background())
		close(settled)
	}()
	select {
	case <-settled:
		t.Fatal("Settle returned while a request waited for its span")
	case ev := <-out:
		t.Fatalf("%+v came out before its span", ev)
	case <-time.After(50 * time.Millisecond): // a negative check: nothing may happen
	}
	in <- spanEvent("r")
	if got := (<-out).Request; got == nil || got.ID != "r" || got.Server == nil {
		t.Fatalf("out = %+v, want r joined", got)
	}
	<-settled
	close(in)
	<-done
	// After Run, Settle never blocks.
	a.Settle(context.Background())
}

func TestAttributorPassThrough(t *testing.T) {
	t.Parallel()
	p := startPipeline(t, AttributorConfig{JoinSpans: true, JoinWait: time.Hour})

	failed := requestEvent("failed")
	failed.Request.Outcome = event.OutcomeTimeout
	p.send(t, failed)
	if got := p.next(t).Request; got.ID != "failed" || got.Breakdown != nil {
		t.Errorf("failed request: %+v, want passed through untouched", got)
	}

	own := requestEvent("own")
	own.Request.Server = timing("llamacpp.timings", map[event.Stage]time.Duration{event.StagePrefill: 9 * ms})
	p.send(t, own)
	got := p.next(t).Request
	if got.ID != "own" || !hasStage(got, event.StagePrefill, event.ServerReported) {
		t.Errorf("request with its own timing: %v, want its prefill, not held", got.Breakdown)
	}

	replayed := requestEvent("replayed")
	replayed.Request.Breakdown = []event.StageTiming{rest(replayed.Request.TTFT)}
	p.send(t, replayed)
	if got := p.next(t).Request; len(got.Breakdown) != 1 {
		t.Errorf("a recorded breakdown was redone: %v", got.Breakdown)
	}

	anonymous := requestEvent("")
	p.send(t, anonymous)
	if got := p.next(t).Request; got.Breakdown == nil {
		t.Error("request with no id to join on was not attributed")
	}
}

// TestAttributorServerKind takes the server kind from the config and from a
// session header passing through: only for llama.cpp is the wait for the
// headers the slot wait.
func TestAttributorServerKind(t *testing.T) {
	t.Parallel()
	llama := func(id string) event.Event {
		ev := requestEvent(id)
		ev.Request.Server = timing("llamacpp.timings", map[event.Stage]time.Duration{event.StagePrefill: 4 * ms})
		return ev
	}
	// Without a queue gauge reading, the slot wait is a measured server
	// wait: front end and queue, not told apart.
	slotQueue := func(r *event.Request) bool { return hasStage(r, event.StageServerWait, event.Measured) }

	p := startPipeline(t, AttributorConfig{Server: "llamacpp"})
	p.send(t, llama("configured"))
	if got := p.next(t).Request; !slotQueue(got) {
		t.Errorf("server llamacpp from the config: %v, want a measured server wait", got.Breakdown)
	}
	p.send(t, event.NewSession(&event.Session{Server: "vllm"}))
	if got := p.next(t); got.Session == nil {
		t.Fatalf("session header not passed on: %+v", got)
	}
	p.send(t, llama("after-header"))
	if got := p.next(t).Request; slotQueue(got) {
		t.Errorf("after a vllm session header: %v, want no server wait from wait_headers", got.Breakdown)
	}

	q := startPipeline(t, AttributorConfig{})
	q.send(t, llama("unknown"))
	if got := q.next(t).Request; slotQueue(got) {
		t.Errorf("unknown server: %v, want no server wait from wait_headers", got.Breakdown)
	}
	q.send(t, event.NewSession(&event.Session{Server: "llamacpp"}))
	q.next(t)
	q.send(t, llama("llamacpp-header"))
	if got := q.next(t).Request; !slotQueue(got) {
		t.Errorf("after a llamacpp session header: %v, want a measured server wait", got.Breakdown)
	}
}

// TestPerTokenMeansGiveNoEstimate: llama.cpp's interval statistics are
// means per token (keyed with event.PerTokenSuffix), and no stage of a
// request is estimated from them; the same mean under a per-request key is.
func TestPerTokenMeansGiveNoEstimate(t *testing.T) {
	t.Parallel()
	d, err := promdialect.ByName(promdialect.LlamaCpp)
	if err != nil {
		t.Fatal(err)
	}
	perToken := &event.ServerSample{Dialect: d.Name, Stages: map[string]event.HistStat{}}
	for _, src := range d.Stages {
		perToken.Stages[src.Stage] = event.HistStat{Count: 100, Mean: 5 * ms}
	}
	if len(perToken.Stages) == 0 || hasIntervalEstimates(perToken) {
		t.Errorf("llama.cpp sample %+v: want per-token stages that give no estimate", perToken.Stages)
	}
	perRequest := &event.ServerSample{Dialect: d.Name, Stages: map[string]event.HistStat{
		string(event.StagePrefill): {Count: 100, Mean: 5 * ms}}}
	if !hasIntervalEstimates(perRequest) {
		t.Errorf("a per-request prefill mean gives no estimate")
	}
}

func TestHeadersAtSlot(t *testing.T) {
	t.Parallel()
	for server, want := range map[string]bool{
		"llamacpp": true, "vllm": false, "latscope-sim": false, "llm-d-sim": false,
		"latscope-sim-slotted": true, "latscope-sim-first-token": false,
		"tgi": false, "openai": false, "unknown": false, "": false,
	} {
		if got := HeadersAtSlot(server); got != want {
			t.Errorf("HeadersAtSlot(%q) = %v, want %v", server, got, want)
		}
	}
	seen := map[string]bool{}
	for _, h := range HeaderTimings() {
		if seen[h.Server] || h.When == "" {
			t.Errorf("header timing table: %+v repeated or unexplained", h)
		}
		seen[h.Server] = true
	}
}

// TestAttributorIntervalMemory: a stage the latest interval did not observe
// is taken from the last interval that did, within intervalMemoryAge; a
// stale sample adds nothing.
func TestAttributorIntervalMemory(t *testing.T) {
	t.Parallel()
	at := time.Unix(1767000000, 0)
	sample := func(d time.Duration, queue, prefill event.HistStat) event.Event {
		waiting := 2.0 // requests waiting: the evidence that the rest is a queue
		return event.NewServer(&event.ServerSample{Time: at.Add(d), Dialect: "vllm", Waiting: &waiting,
			Stages: map[string]event.HistStat{"queue": queue, "prefill": prefill}})
	}
	// request is a request at the server after the sample at d.
	request := func(id string, d time.Duration) event.Event {
		ev := requestEvent(id)
		ev.Request.Start, ev.Request.Intended = at.Add(d), at.Add(d)
		return ev
	}
	queueOf := func(r *event.Request) (time.Duration, bool) {
		for _, s := range r.Breakdown {
			if s.Stage == event.StageQueue {
				return s.Duration, true
			}
		}
		return 0, false
	}
	p := startPipeline(t, AttributorConfig{})
	p.send(t, sample(0, event.HistStat{Count: 4, Mean: 20 * ms, P99: 30 * ms}, event.HistStat{Count: 4, Mean: 10 * ms}))
	p.next(t)
	// The next interval saw no request end: its queue statistics are empty.
	p.send(t, sample(time.Second, event.HistStat{}, event.HistStat{Count: 1, Mean: 12 * ms}))
	p.next(t)
	p.send(t, request("quiet", 1500*time.Millisecond))
	got := p.next(t).Request
	if q, ok := queueOf(got); !ok || q != 22800*us {
		t.Errorf("after a quiet interval: queue %v (found %v), want 22.8ms (fitted within the limit of the interval before): %v", q, ok, got.Breakdown)
	}

	stale := sample(2*time.Second, event.HistStat{Count: 9, Mean: time.Second, P99: 2 * time.Second}, event.HistStat{Count: 9, Mean: 1 * ms})
	stale.Server.Stale = true
	p.send(t, stale)
	p.next(t)
	later := sample(time.Minute, event.HistStat{}, event.HistStat{Count: 1, Mean: 12 * ms})
	none := 0.0
	later.Server.Waiting = &none
	p.send(t, later)
	p.next(t)
	p.send(t, request("later", time.Minute+500*time.Millisecond))
	if got := p.next(t).Request; hasStage(got, event.StageQueue, event.Estimated) {
		t.Errorf("a minute later: %v, want no queue from statistics that old (nor from a stale sample)", got.Breakdown)
	}
}

// TestAttributorModelLoading: the first 503 "Loading model" answer gives one
// collector marker, before the request; more give none until a request has
// succeeded.
func TestAttributorModelLoading(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Unix(1767000000, 0)}
	p := startPipeline(t, AttributorConfig{Now: clock.Now})
	loading := func(id string) event.Event {
		ev := requestEvent(id)
		ev.Request.Outcome, ev.Request.Status, ev.Request.Error = event.OutcomeHTTPStatus, 503, "http 503: Loading model"
		return ev
	}
	p.send(t, loading("a"))
	m := p.next(t).Marker
	if m == nil || m.Kind != event.MarkerCollector || !strings.HasPrefix(m.Message, "model loading:") || !strings.Contains(m.Message, "Loading model") {
		t.Fatalf("first 503 Loading model: marker %+v", m)
	}
	if got := p.next(t).Request; got == nil || got.ID != "a" {
		t.Fatalf("the request did not follow its marker: %+v", got)
	}
	p.send(t, loading("b"))
	if got := p.next(t); got.Request == nil {
		t.Errorf("a second loading answer gave %+v, want only the request", got)
	}
	other := requestEvent("busy")
	other.Request.Outcome, other.Request.Status, other.Request.Error = event.OutcomeHTTPStatus, 503, "http 503: server busy"
	p.send(t, other)
	p.next(t)
	p.send(t, requestEvent("ok"))
	p.next(t)
	clock.Add(time.Minute)
	p.send(t, loading("c"))
	if m2 := p.next(t).Marker; m2 == nil || !m2.Time.After(m.Time) {
		t.Errorf("loading again after a success: marker %+v, want a new, later one", m2)
	}
}

// TestAttributorJoinKeepsCachedTokens: a request whose record knows its
// cached tokens but has no stages waits for its span, and the span's
// timing keeps the count.
func TestAttributorJoinKeepsCachedTokens(t *testing.T) {
	t.Parallel()
	p := startPipeline(t, AttributorConfig{JoinSpans: true, JoinWait: time.Hour})
	ev := requestEvent("cached")
	ev.Request.Server = &event.ServerTiming{Source: "usage", PromptTokens: 512, CachedTokens: 384}
	p.send(t, ev)
	p.nothingOut(t)
	p.send(t, spanEvent("cached"))
	got := p.next(t).Request
	if got.Server == nil || got.Server.Source != event.SourceOTLP || got.Server.CachedTokens != 384 {
		t.Fatalf("joined timing = %+v, want the span's with 384 cached tokens", got.Server)
	}
	want := "otlp (prefill includes first decode; 384 of 512 prompt tokens cached)"
	for _, s := range got.Breakdown {
		if s.Stage == event.StagePrefill && s.Source != want {
			t.Errorf("prefill source %q, want %q", s.Source, want)
		}
	}
}

func TestAttributorReusedConnectionRTT(t *testing.T) {
	t.Parallel()
	p := startPipeline(t, AttributorConfig{})
	first := requestEvent("first")
	first.Request.ConnectRTT = 400 * us
	p.send(t, first)
	p.next(t)

	reused := requestEvent("reused")
	reused.Request.ConnectRTT, reused.Request.ReusedConn = 0, true
	p.send(t, reused)
	got := p.next(t).Request
	if want := est(event.StageNetworkOut, 200*us, "connect_rtt (1 sample)"); got.Breakdown[len(clientPart())] != want {
		t.Errorf("reused connection: %v, want network_out 200µs from the target's last RTT", got.Breakdown)
	}

	elsewhere := requestEvent("elsewhere")
	elsewhere.Request.ConnectRTT, elsewhere.Request.Target = 0, "http://other"
	p.send(t, elsewhere)
	if got := p.next(t).Request; hasStage(got, event.StageNetworkOut, event.Estimated) {
		t.Errorf("a target with no RTT got a network estimate: %v", got.Breakdown)
	}
}

// TestAttributorNetworkEstimateIgnoresASlowDial feeds loopback-like connect
// times (about 60 µs) with one dial slowed to 4.5 ms, as on a busy machine:
// every later request's network estimate stays within 0.2 ms of the true
// round trip, and says how many connects it rests on.
func TestAttributorNetworkEstimateIgnoresASlowDial(t *testing.T) {
	t.Parallel()
	const trueRTT = 60 * us
	p := startPipeline(t, AttributorConfig{})
	rng := rand.New(rand.NewPCG(3, 4))
	var worst time.Duration
	for i := range 40 {
		ev := requestEvent(fmt.Sprintf("r%d", i))
		switch {
		case i == 5:
			ev.Request.ConnectRTT = 4500 * us // the slow dial
		case i%4 == 0:
			ev.Request.ConnectRTT = trueRTT + time.Duration(rng.Int64N(int64(30*us))) // jitter only adds
		default:
			ev.Request.ConnectRTT, ev.Request.ReusedConn = 0, true
		}
		p.send(t, ev)
		got := p.next(t).Request
		var network time.Duration
		var src string
		for _, s := range got.Breakdown {
			if s.Stage == event.StageNetworkOut || s.Stage == event.StageNetworkReturn {
				network += s.Duration
				src = s.Source
			}
		}
		if err := (network - trueRTT).Abs(); err > worst {
			worst = err
		}
		if i >= 5 && (network-trueRTT).Abs() > 200*us {
			t.Errorf("request %d: network estimate %v, true RTT %v (%s)", i, network, trueRTT, src)
		}
		if i == 39 && src != "connect_rtt (min of 11)" {
			t.Errorf("last request's network source = %q, want it to say the estimate rests on 11 connects", src)
		}
	}
	t.Logf("worst network estimate error after the slow dial: %v", worst)
}

func TestConnectTimes(t *testing.T) {
	t.Parallel()
	var c connectTimes
	if got := c.estimate(); got != (NetworkEstimate{}) {
		t.Errorf("empty: %+v", got)
	}
	c.add(4500 * us)
	if got := c.estimate(); got != (NetworkEstimate{RTT: 4500 * us, Samples: 1}) {
		t.Errorf("one slow dial: %+v", got)
	}
	c.add(80 * us)
	c.add(95 * us)
	if got := c.estimate(); got != (NetworkEstimate{RTT: 80 * us, Samples: 3}) {
		t.Errorf("after two fast dials: %+v, want the lowest", got)
	}
	// A route change to a longer path is followed once the short dials
	// have left the window.
	for range connectWindow {
		c.add(2 * ms)
	}
	if got := c.estimate(); got != (NetworkEstimate{RTT: 2 * ms, Samples: connectWindow}) {
		t.Errorf("after a route change: %+v, want 2ms from %d samples", got, connectWindow)
	}
}

func TestAttributorShutdown(t *testing.T) {
	t.Parallel()
	t.Run("in closes: no span can come, held requests go at once, then out closes", func(t *testing.T) {
		t.Parallel()
		p := startPipeline(t, AttributorConfig{JoinSpans: true, JoinWait: time.Hour})
		p.send(t, requestEvent("x"))
		close(p.in)
		if got := p.next(t).Request; got.ID != "x" || got.Server != nil || got.Breakdown == nil {
			t.Errorf("out = %+v, want x attributed without a span", got)
		}
		select {
		case _, ok := <-p.out:
			if ok {
				t.Error("more events after the last one")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("out not closed")
		}
	})
	t.Run("ctx ends: held requests released at once, out closed", func(t *testing.T) {
		t.Parallel()
		p := startPipeline(t, AttributorConfig{JoinSpans: true, JoinWait: time.Hour})
		p.send(t, requestEvent("held-1"))
		p.send(t, requestEvent("held-2"))
		p.stop()
		var ids []string
		for ev := range p.out {
			ids = append(ids, ev.Request.ID)
			checkSum(t, ev.Request, ev.Request.Breakdown)
		}
		if strings.Join(ids, ",") != "held-1,held-2" {
			t.Errorf("released %v, want held-1,held-2", ids)
		}
	})
	t.Run("ctx ends and nobody reads: Run still returns", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		in, out := make(chan event.Event), make(chan event.Event) // out is never read
		a := NewAttributor(AttributorConfig{JoinSpans: true, JoinWait: time.Hour})
		done := make(chan struct{})
		go func() {
			defer close(done)
			a.Run(ctx, in, out)
		}()
		in <- requestEvent("stuck")
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Run blocked on a consumer that stopped reading")
		}
		if s := a.Stats(); s.Dropped != 1 {
			t.Errorf("stats = %+v, want 1 dropped", s)
		}
	})
}

func TestAttributorMaxPending(t *testing.T) {
	t.Parallel()
	p := startPipeline(t, AttributorConfig{JoinSpans: true, JoinWait: time.Hour, MaxPending: 2})
	for _, id := range []string{"1", "2", "3"} {
		p.send(t, requestEvent(id))
	}
	if got := p.next(t).Request.ID; got != "1" {
		t.Errorf("released %q past MaxPending, want the oldest, 1", got)
	}
	p.nothingOut(t)
}

// TestAttributorMaxPendingChunks: the held requests' chunks are bounded
// too, since a count alone lets long outputs hold gigabytes.
func TestAttributorMaxPendingChunks(t *testing.T) {
	t.Parallel()
	p := startPipeline(t, AttributorConfig{JoinSpans: true, JoinWait: time.Hour, MaxPendingChunks: 250})
	for _, id := range []string{"1", "2", "3"} {
		ev := requestEvent(id)
		ev.Request.Chunks = make([]event.Chunk, 100)
		p.send(t, ev)
	}
	if got := p.next(t).Request.ID; got != "1" {
		t.Errorf("released %q past MaxPendingChunks, want the oldest, 1", got)
	}
	p.nothingOut(t)
}

// TestEndToEndSimProbeOTLP runs the simulator (sending vLLM-shaped spans),
// the real probe client, the receiver and the attributor together over
// loopback at concurrency 16, and checks every request's attributed server
// stages against the simulator's ground truth.
func TestEndToEndSimProbeOTLP(t *testing.T) {
	t.Parallel()
	const (
		requests    = 96
		concurrency = 16
		tolerance   = time.Millisecond
	)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()

	rln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	receiver := collector.NewOTLPReceiver(collector.OTLPConfig{Listener: rln})
	var servers sync.WaitGroup
	defer servers.Wait()
	defer cancel() // runs first: stops the simulator before the Wait

	var mu sync.Mutex
	truths := map[string]sim.Truth{}
	profile, err := sim.ProfileByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	server, err := sim.New(sim.Config{
		Profile:      profile,
		OTLPEndpoint: "http://" + rln.Addr().String() + "/v1/traces",
		Seed:         7,
		OnFinish: func(tr sim.Truth) {
			mu.Lock()
			defer mu.Unlock()
			truths[tr.RequestID] = tr
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	sln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	servers.Go(func() { server.Serve(ctx, sln) })

	client, err := probe.NewClient(probe.ClientConfig{BaseURL: "http://" + sln.Addr().String(), Dialect: "openai-chat", Model: server.Model()})
	if err != nil {
		t.Fatal(err)
	}

	// The real pipeline: the probe's requests are the primary source, the
	// receiver an aux one that runs until the attributor has settled.
	attributor := NewAttributor(AttributorConfig{JoinSpans: true, JoinWait: 20 * time.Second})
	probeSource := pipeline.SourceFunc(func(ctx context.Context, emit func(event.Event)) error {
		jobs := make(chan int)
		var workers sync.WaitGroup
		for w := range concurrency {
			workers.Go(func() {
				for i := range jobs {
					emit(event.NewRequest(client.Do(ctx, probe.RequestSpec{
						ID:           fmt.Sprintf("e2e-%03d", i),
						TraceID:      fmt.Sprintf("%032x", 0xe2e000+i),
						SpanID:       fmt.Sprintf("%016x", 0x5000+i),
						Seq:          uint64(i),
						Worker:       w,
						Prompt:       strings.Repeat("tell me about latency ", 1+i%7),
						PromptTokens: 20,
						OutputTokens: 4,
					})))
				}
			})
		}
		for i := range requests {
			jobs <- i
		}
		close(jobs)
		workers.Wait()
		return nil
	})
	got, _ := runPipeline(ctx, t, pipeline.Config{
		Primary: []pipeline.Source{probeSource}, Aux: []pipeline.Source{receiver}, Stage: attributor,
	})
	if len(got) != requests {
		t.Fatalf("got %d requests out, want %d", len(got), requests)
	}

	mu.Lock()
	defer mu.Unlock()
	checkAllAgainstTruth(t, got, truths, tolerance)
	if s := attributor.Stats(); s.FromSpan != requests {
		t.Errorf("attributor stats = %+v, want all %d joined from spans", s, requests)
	}
}

// checkAllAgainstTruth checks every request: succeeded, its stages summing
// to its TTFT, joined with its span, and its stages against the truth.
func checkAllAgainstTruth(t *testing.T, got []*event.Request, truths map[string]sim.Truth, tolerance time.Duration) {
	t.Helper()
	for _, r := range got {
		if !r.OK() {
			t.Errorf("%s: outcome %s (%s)", r.ID, r.Outcome, r.Error)
			continue
		}
		checkSum(t, r, r.Breakdown)
		if r.Server == nil || r.Server.Source != event.SourceOTLP {
			t.Errorf("%s: not joined with its span (server timing %+v)", r.ID, r.Server)
			continue
		}
		truth, ok := truths[r.ID]
		if !ok {
			t.Errorf("%s: the simulator reported no truth", r.ID)
			continue
		}
		checkAgainstTruth(t, r, truth, tolerance)
	}
}

// checkAgainstTruth checks that r's queue, prefill and front-end stages
// are server-reported and within tolerance of the simulator's truth.
func checkAgainstTruth(t *testing.T, r *event.Request, truth sim.Truth, tolerance time.Duration) {
	t.Helper()
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	if r.Seq == 0 {
		t.Logf("%s: TTFT %v, breakdown %v; truth %+v", r.ID, r.TTFT, r.Breakdown, truth)
	}
	want := map[event.Stage]time.Duration{
		event.StageQueue:   us(truth.QueueUs),
		event.StagePrefill: us(truth.PrefillUs + truth.FirstDecodeUs),
		// Frontend work: arrival → first token picked up by the front
		// end, less queue and prefill. The truth's stages after that
		// pick (detokenize, framing) run back to back to the first
		// frame, so its goroutine hand-offs (other_us, the sim's "IPC")
		// all fall in this interval.
		event.StageTokenize: us(truth.HTTPUs + truth.LoopWaitUs + truth.TokenizeUs + truth.FaultDelayUs + truth.OtherUs),
	}
	for stage, w := range want {
		var found *event.StageTiming
		for i := range r.Breakdown {
			if r.Breakdown[i].Stage == stage {
				found = &r.Breakdown[i]
			}
		}
		switch {
		case found == nil:
			t.Errorf("%s: no %s in breakdown %v", r.ID, stage, r.Breakdown)
		case found.Provenance != event.ServerReported:
			t.Errorf("%s: %s is %s, want server-reported", r.ID, stage, found.Provenance)
		case (found.Duration - w).Abs() > tolerance:
			t.Errorf("%s: %s = %v, truth %v", r.ID, stage, found.Duration, w)
		}
	}
}

func TestSpanStoreBounds(t *testing.T) {
	t.Parallel()
	now := time.Unix(1767000000, 0)
	s := newSpanStore(time.Minute, 3)
	put := func(ids ...string) {
		for _, id := range ids {
			s.put([]string{requestKey(id)}, spanFor(), now)
		}
	}
	has := func(id string) bool {
		_, ok := s.find([]string{requestKey(id)}, now)
		return ok
	}
	put("a", "b", "c", "d", "e")
	for id, want := range map[string]bool{"a": false, "b": false, "c": true, "d": true, "e": true} {
		if has(id) != want {
			t.Errorf("after 5 puts into 3: has(%s) = %v", id, !want)
		}
	}
	now = now.Add(40 * time.Second)
	put("f")                        // full: c goes for space
	now = now.Add(30 * time.Second) // d and e are 70 s old, f 30 s
	for id, want := range map[string]bool{"d": false, "e": false, "f": true} {
		if has(id) != want {
			t.Errorf("after the TTL: has(%s) = %v", id, !want)
		}
	}
	// A key reused by a later span: the newer wins and the older's expiry
	// does not remove it.
	put("g")
	now = now.Add(10 * time.Second)
	put("g")
	now = now.Add(55 * time.Second)
	if !has("g") {
		t.Error("re-sent id lost when its older entry expired")
	}
	for i := range 500 {
		put(fmt.Sprint(i%7), "y")
	}
	if s.len() > 3 || len(s.byKey) > 3 || cap(s.fifo) > 256 {
		t.Errorf("store holds %d entries, %d keys, fifo capacity %d: not bounded", s.len(), len(s.byKey), cap(s.fifo))
	}
}
