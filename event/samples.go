package event

import (
	"encoding/json"
	"math"
	"time"
)

// ServerSample is one scrape interval of a server's own metrics, already
// turned into rates and interval statistics by the collector.
type ServerSample struct {
	Time     time.Time     `json:"time"`
	Source   string        `json:"source"`  // the metrics URL
	Dialect  string        `json:"dialect"` // "vllm", "vllm-v0", "sglang", "tgi", "llamacpp", "triton", "trtllm", "lmdeploy", "unknown"
	Interval time.Duration `json:"interval_ns"`
	// Stale is set when this sample repeats the last good values because the
	// latest scrape failed; Error then says why.
	Stale bool   `json:"stale,omitempty"`
	Error string `json:"error,omitempty"`
	// Reset is set when a counter or histogram went down since the previous
	// scrape (a server restart): this interval's numbers count from zero.
	Reset bool `json:"reset,omitempty"`

	Waiting *float64 `json:"waiting,omitempty"`  // queue depth
	Running *float64 `json:"running,omitempty"`  // requests in the running batch
	KVCache *float64 `json:"kv_cache,omitempty"` // KV cache use, fraction 0..1

	PromptTokensPerSec *float64 `json:"prompt_tps,omitempty"`
	GenTokensPerSec    *float64 `json:"gen_tps,omitempty"`

	// Preemptions is how many requests the server preempted (evicted from
	// the running batch to free KV cache) over the interval, from its
	// counter; nil when the server does not count them.
	Preemptions *float64 `json:"preemptions,omitempty"`
	// PrefixQueries and PrefixHits are the prompt tokens the server looked
	// up in its prefix cache over the interval and those it found there,
	// from its counters (vLLM); nil without them.
	PrefixQueries *float64 `json:"prefix_queries,omitempty"`
	PrefixHits    *float64 `json:"prefix_hits,omitempty"`
	// PrefixHitRate is the server's own prefix-cache hit-rate gauge (0..1;
	// SGLang, TensorRT-LLM, LMDeploy), nil when it has none.
	PrefixHitRate *float64 `json:"prefix_hit_rate,omitempty"`

	// Stages holds the interval's statistics of each stage histogram the
	// server exposes, keyed by "queue", "prefill", "decode", "ttft", "itl",
	// "e2e", "inference", "tokenize".
	// A key ending in PerTokenSuffix holds a mean per token instead.
	Stages map[string]HistStat `json:"stages,omitempty"`
	// Gauges holds every gauge by its metric name, so an unknown server still
	// shows something.
	Gauges map[string]float64 `json:"gauges,omitempty"`
}

// PerTokenSuffix ends the ServerSample.Stages keys whose means are per
// token, not per request (llama.cpp's prompt and generation counters), e.g.
// "prefill_per_token": the metrics collector writes them, and the
// attributor never takes one for a stage.
const PerTokenSuffix = "_per_token"

// HistStat summarises the observations a histogram gained during one interval.
type HistStat struct {
	Count float64       `json:"count"`
	Mean  time.Duration `json:"mean_ns"`
	P50   time.Duration `json:"p50_ns,omitempty"` // interpolated from bucket deltas
	P90   time.Duration `json:"p90_ns,omitempty"`
	P99   time.Duration `json:"p99_ns,omitempty"`
	// Bounds are the histogram's finite bucket bounds, in seconds, and
	// Counts the observations the interval added to each bucket (not
	// cumulative), with one more count at the end for those above the last
	// bound: what a window's quantiles are estimated from. Both are empty
	// for a stage read from a pair of counters.
	Bounds []float64 `json:"bounds,omitempty"`
	Counts []float64 `json:"counts,omitempty"`
}

// Sum is the interval's total time in the stage (Count × Mean).
func (h HistStat) Sum() time.Duration {
	if !(h.Count > 0) || math.IsInf(h.Count, 0) {
		return 0
	}
	ns := h.Count * float64(h.Mean)
	switch {
	case math.IsNaN(ns):
		return 0
	case ns >= math.MaxInt64:
		return math.MaxInt64
	case ns <= math.MinInt64:
		return math.MinInt64
	}
	return time.Duration(ns)
}

// GPUSample is one reading of every GPU the collector watches: the local
// ones through NVML, or those of one or more nodes through their exporters.
type GPUSample struct {
	Time time.Time `json:"time"`
	// Available is false when no GPU can be read; Reason then says why
	// (no driver, no GPU, built without cgo, no exporter page answered, ...).
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"`
	// Simulated marks a GPU invented by the demo from the simulator's batch.
	// It must be labelled as such wherever it is shown.
	Simulated bool `json:"simulated,omitempty"`
	// Collector names what took the sample: GPUCollectorNVML (also when
	// empty, in recordings from before this field) or
	// GPUCollectorExporter, which reads GPU exporters' metrics pages.
	Collector string      `json:"collector,omitempty"`
	Devices   []GPUDevice `json:"devices,omitempty"`
}

// The collectors of GPU samples (GPUSample.Collector).
const (
	GPUCollectorNVML     = "nvml"        // NVML on the machine latscope runs on
	GPUCollectorExporter = "gpu-metrics" // GPU exporters' metrics pages, scraped
)

// Where a device's figures came from (GPUDevice.Source).
const (
	GPUSourceNVML = "nvml" // NVML on the machine latscope runs on
	GPUSourceDCGM = "dcgm" // NVIDIA's dcgm-exporter, scraped
	GPUSourceAMD  = "amd"  // AMD's device-metrics-exporter, scraped
)

// GPUDevice is one GPU's state.
type GPUDevice struct {
	Index          int          `json:"index"`
	Name           string       `json:"name"`
	UUID           string       `json:"uuid,omitempty"`
	UtilGPU        uint32       `json:"util_gpu"` // percent
	UtilMem        uint32       `json:"util_mem"` // percent
	MemUsed        uint64       `json:"mem_used"` // bytes
	MemTotal       uint64       `json:"mem_total"`
	PowerMilliW    uint32       `json:"power_mw"`
	PowerLimitMW   uint32       `json:"power_limit_mw,omitempty"`
	TempC          uint32       `json:"temp_c"`
	SMClockMHz     uint32       `json:"sm_clock_mhz"`
	SMClockMaxMHz  uint32       `json:"sm_clock_max_mhz,omitempty"`
	ThrottleReason []string     `json:"throttle,omitempty"` // decoded reasons, e.g. "sw_power_cap"
	Processes      []GPUProcess `json:"processes,omitempty"`
	// Errors lists fields the driver could not report, e.g. "power: not supported".
	Errors []string `json:"errors,omitempty"`

	// Source says where the figures came from: GPUSourceNVML, GPUSourceDCGM
	// or GPUSourceAMD; empty in recordings from before this field (NVML)
	// and for the demo's simulated GPU.
	Source string `json:"source,omitempty"`
	// SourceURL is the exporter page the figures were read from, without
	// credentials; empty for NVML.
	SourceURL string `json:"source_url,omitempty"`
	// Host is the node the GPU is in, as the exporter names it (its
	// hostname label), so several nodes' GPU 0 are told apart.
	Host string `json:"host,omitempty"`
	// Partition names a part of a physical GPU that the exporter reports
	// on its own: a MIG instance ("MIG 1g.10gb #3") or an AMD compute
	// partition ("CPX #2"); empty for a whole GPU.
	Partition string `json:"partition,omitempty"`
	// Pods lists the Kubernetes containers the exporter maps to this GPU.
	Pods []GPUPod `json:"pods,omitempty"`
	// Stale is set when the exporter's latest scrape failed: the figures
	// are those of its last good one.
	Stale bool `json:"stale,omitempty"`

	// Activity over the exporter's sample period as a fraction 0..1, nil
	// when not reported: the graphics/compute engine (DCGM
	// PROF_GR_ENGINE_ACTIVE, AMD GUI_UTIL), the SMs (DCGM PROF_SM_ACTIVE),
	// the tensor cores (DCGM PROF_PIPE_TENSOR_ACTIVE, AMD MFMA) and the
	// memory interface (DCGM PROF_DRAM_ACTIVE).
	GrEngineActive *float64 `json:"gr_engine_active,omitempty"`
	SMActive       *float64 `json:"sm_active,omitempty"`
	TensorActive   *float64 `json:"tensor_active,omitempty"`
	DRAMActive     *float64 `json:"dram_active,omitempty"`
}

// GPUPod is a Kubernetes container an exporter maps to a GPU.
type GPUPod struct {
	Namespace string `json:"namespace,omitempty"`
	Pod       string `json:"pod"`
	Container string `json:"container,omitempty"`
}

// GPUProcess is one process using a GPU.
type GPUProcess struct {
	PID     uint32 `json:"pid"`
	Name    string `json:"name,omitempty"`
	MemUsed uint64 `json:"mem_used"`
}

// HostSample is one interval of the client host's own CPU pressure: the
// machine latscope runs on, whose delays are in every timing it takes.
// Each figure is nil when the host does not give it (no PSI on a kernel
// built without it, no /proc outside Linux, no delta yet in the first
// sample).
type HostSample struct {
	Time time.Time `json:"time"`
	// Interval is the time the deltas below cover (zero in a first sample,
	// whose PSI figure is the kernel's own 10-second average).
	Interval time.Duration `json:"interval_ns,omitempty"`
	// Available is false when the host gives none of the figures; Reason
	// then says why.
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"`

	// PSISome is the share (0..1) of the interval in which at least one
	// runnable task waited for a CPU (/proc/pressure/cpu "some"), from
	// the stall counter's delta; PSISomeAvg10 is the kernel's 10-second
	// average of it.
	PSISome      *float64 `json:"psi_cpu_some,omitempty"`
	PSISomeAvg10 *float64 `json:"psi_cpu_some_avg10,omitempty"`
	// Steal is the share (0..1) of the CPUs' time the hypervisor gave to
	// other guests over the interval (/proc/stat).
	Steal *float64 `json:"steal,omitempty"`
	// RunQueue is how many tasks were runnable at the sample (procs_running,
	// latscope's own included), against Cores CPUs.
	RunQueue *int `json:"run_queue,omitempty"`
	Cores    int  `json:"cores,omitempty"`
	// SelfCPU is latscope's own CPU use over the interval, in cores (1 =
	// one core busy all the time).
	SelfCPU *float64 `json:"self_cpu,omitempty"`
}

// MarkerKind classifies a marker.
type MarkerKind string

// The marker kinds.
const (
	MarkerStall      MarkerKind = "stall"       // several streams paused together; Cause says why
	MarkerGap        MarkerKind = "gap"         // one unusual gap, e.g. Nagle-like
	MarkerProbeLimit MarkerKind = "probe_limit" // the probe, not the server, is the bottleneck
	MarkerInsight    MarkerKind = "insight"     // a computed observation, e.g. "queue wait is 80% of TTFT"
	MarkerCollector  MarkerKind = "collector"   // a collector's state changed (error, stale, recovered, unavailable)
	MarkerNote       MarkerKind = "note"        // anything else worth a line
)

// Marker is something noteworthy at a point in time, with the numbers behind it.
type Marker struct {
	Time     time.Time          `json:"time"`
	Kind     MarkerKind         `json:"kind"`
	Source   string             `json:"source,omitempty"` // who emitted it: "probe", "stall-detector", "collector.prom", ...
	Message  string             `json:"message"`
	Duration time.Duration      `json:"duration_ns,omitempty"`
	Values   map[string]float64 `json:"values,omitempty"`
	// RequestIDs lists the requests involved (e.g. the stalled streams).
	RequestIDs []string `json:"request_ids,omitempty"`
	// Cause says what a stall marker's evidence points to (one of the
	// Stall* causes); empty for other markers.
	Cause StallCause `json:"cause,omitempty"`
}

// StallCause is what caused a pause that several streams shared, as far as
// the evidence shows.
type StallCause string

// The stall causes.
const (
	// StallPrefillInterference: a prefill ran in the pause (another
	// request's first token closed it, or the server's timing puts a
	// prefill over it), and the decoding streams waited for it.
	StallPrefillInterference StallCause = "prefill_interference"
	// StallFrontEndBlock: the server's front end (HTTP parsing,
	// tokenization, its event loop) held every stream's frames: a
	// request's front-end work covers the pause, or no prefill ran in it.
	StallFrontEndBlock StallCause = "front_end_block"
	// StallProbeStarved: latscope's own goroutines were held up over the
	// pause, so it is the probe's pause, not the server's.
	StallProbeStarved StallCause = "probe_starved"
	// StallClientHost: the machine latscope runs on was short of CPU over
	// the pause (its pressure stall information, or the hypervisor's steal,
	// from the host collector's samples), so its own delays are in the
	// gaps: not the server's pause.
	StallClientHost StallCause = "client_host"
	// StallUnexplained: the streams paused together and nothing shows why.
	StallUnexplained StallCause = "unexplained"
)

// MarshalJSON leaves out values that JSON cannot hold (NaN, ±Inf), so one
// bad figure from a source cannot make a whole record, report or recording
// fail to encode.
func (m Marker) MarshalJSON() ([]byte, error) {
	type plain Marker
	p := plain(m)
	for _, v := range m.Values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			p.Values = make(map[string]float64, len(m.Values))
			for k, v := range m.Values {
				if !math.IsNaN(v) && !math.IsInf(v, 0) {
					p.Values[k] = v
				}
			}
			break
		}
	}
	return json.Marshal(p)
}
