// Package promdialect is the registry of servers' metrics dialects: for
// each server (vLLM, SGLang, TGI, llama.cpp, Triton, TensorRT-LLM,
// LMDeploy) the names of the Prometheus metrics that give its queue, its
// batch, its KV cache, its token counters and its stages. The Prometheus
// collector reads a scrape through one; the attributor names a server's
// queue gauge from one. It is data, and imports nothing of latscope's but
// event.
package promdialect

import (
	"fmt"
	"sort"
	"strings"

	"github.com/latscope/latscope/event"
)

// Dialect maps one server's metric names onto the fields of a ServerSample.
// Where a list of candidates is given, the first one present in the scrape
// wins: servers renamed their metrics between versions and some expose both
// names for a while.
type Dialect struct {
	Name string // as in event.ServerSample.Dialect

	Waiting []MetricRef // queue depth gauges, summed over series
	Running []MetricRef // running-batch gauges, summed over series
	// KVFraction are KV cache use gauges already in 0..1, averaged over
	// series (several engines each report their own pool).
	KVFraction []MetricRef
	// KVUsed and KVTotal give the fraction as sum(used)/sum(total) when no
	// KVFraction gauge is present.
	KVUsed, KVTotal MetricRef

	// PromptTokens and GenTokens are counters of tokens; a histogram named
	// here counts through its sum (TGI's per-request token-length histograms).
	PromptTokens []MetricRef
	GenTokens    []MetricRef

	// Preemptions are counters of preempted requests; PrefixQueries and
	// PrefixHits counters of prompt tokens looked up in the prefix cache
	// and found there; PrefixHitRate a hit-rate gauge in 0..1, for servers
	// that keep no counters.
	Preemptions   []MetricRef
	PrefixQueries []MetricRef
	PrefixHits    []MetricRef
	PrefixHitRate []MetricRef
	// PrefixMisses are counters of prompt tokens the prefix cache did not
	// serve, for a server that counts misses and hits apart (llama.cpp):
	// without PrefixQueries, the lookups are the hits plus the misses.
	PrefixMisses []MetricRef

	Stages []StageSource
}

// MetricRef names a metric family and optionally one label value within it.
type MetricRef struct {
	Name  string
	Label string // when set, only series whose Label equals Value count
	Value string
}

// StageSource says where one stage's interval statistics come from: a
// histogram (first candidate present wins) or, failing that, a pair of
// counters whose ratio of deltas is the mean.
type StageSource struct {
	// Stage is the key in event.ServerSample.Stages: "queue", "prefill",
	// "decode", "ttft", "itl", "e2e", "inference", "tokenize", "tpot" for
	// means per request; a mean per token ends in event.PerTokenSuffix instead.
	Stage string
	Hist  []MetricRef
	// Sum accumulates time, Count the observations it is spread over
	// (requests for Triton, tokens for llama.cpp).
	Sum, Count MetricRef
	// Scale converts the metric's unit to seconds (1e-6 for µs, 1e-3 for
	// ms); zero means 1.
	Scale float64
}

// ToSeconds is the factor that converts the metric's unit to seconds.
func (s StageSource) ToSeconds() float64 {
	if s.Scale == 0 {
		return 1
	}
	return s.Scale
}

// The dialect names, as in event.ServerSample.Dialect.
const (
	VLLM     = "vllm"
	VLLMv0   = "vllm-v0"
	SGLang   = "sglang"
	TGI      = "tgi"
	LlamaCpp = "llamacpp"
	Triton   = "triton"
	TRTLLM   = "trtllm"
	LMDeploy = "lmdeploy"
	Unknown  = "unknown"
)

// Names lists every dialect name ByName accepts, sorted.
func Names() []string {
	names := []string{VLLM, VLLMv0, SGLang, TGI, LlamaCpp, Triton, TRTLLM, LMDeploy, Unknown}
	sort.Strings(names)
	return names
}

// ByName returns the named dialect.
func ByName(name string) (Dialect, error) {
	switch name {
	case VLLM, VLLMv0:
		return vllmDialect(name), nil
	case SGLang:
		return sglangDialect(), nil
	case TGI:
		return tgiDialect(), nil
	case LlamaCpp:
		return llamacppDialect(), nil
	case Triton:
		return tritonDialect(), nil
	case TRTLLM:
		return trtllmDialect(), nil
	case LMDeploy:
		return lmdeployDialect(), nil
	case Unknown:
		return Dialect{Name: Unknown}, nil
	}
	return Dialect{}, fmt.Errorf("unknown metrics dialect %q (want auto or one of %s)", name, strings.Join(Names(), ", "))
}

func metricRefs(names ...string) []MetricRef {
	out := make([]MetricRef, len(names))
	for i, n := range names {
		out[i] = MetricRef{Name: n}
	}
	return out
}

func histStageSource(stage string, names ...string) StageSource {
	return StageSource{Stage: stage, Hist: metricRefs(names...)}
}

// vllmDialect covers the V1 engine and v0 (and the early V1 releases that
// expose both generations of names); the candidates list the newer name first.
func vllmDialect(name string) Dialect {
	return Dialect{
		Name:         name,
		Waiting:      metricRefs("vllm:num_requests_waiting"),
		Running:      metricRefs("vllm:num_requests_running"),
		KVFraction:   metricRefs("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
		PromptTokens: metricRefs("vllm:prompt_tokens_total"),
		GenTokens:    metricRefs("vllm:generation_tokens_total"),
		Preemptions:  metricRefs("vllm:num_preemptions_total"),
		// The gpu_ names are the deprecated ones of 0.9 and before.
		PrefixQueries: metricRefs("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
		PrefixHits:    metricRefs("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
		Stages: []StageSource{
			histStageSource("queue", "vllm:request_queue_time_seconds", "vllm:time_in_queue_requests"),
			histStageSource("prefill", "vllm:request_prefill_time_seconds"),
			histStageSource("decode", "vllm:request_decode_time_seconds"),
			histStageSource("inference", "vllm:request_inference_time_seconds"),
			histStageSource("ttft", "vllm:time_to_first_token_seconds"),
			// The old TPOT histogram was observed once per output step,
			// which is what ITL means now.
			histStageSource("itl", "vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
			histStageSource("tpot", "vllm:request_time_per_output_token_seconds"),
			histStageSource("e2e", "vllm:e2e_request_latency_seconds"),
		},
	}
}

// sglangDialect: the per-stage latency histogram is left out because its
// stage label values are not documented.
func sglangDialect() Dialect {
	return Dialect{
		Name:          SGLang,
		Waiting:       metricRefs("sglang:num_queue_reqs"),
		Running:       metricRefs("sglang:num_running_reqs"),
		KVFraction:    metricRefs("sglang:token_usage"),
		PromptTokens:  metricRefs("sglang:prompt_tokens_total"),
		GenTokens:     metricRefs("sglang:generation_tokens_total"),
		PrefixHitRate: metricRefs("sglang:cache_hit_rate"),
		Stages: []StageSource{
			histStageSource("queue", "sglang:queue_time_seconds"),
			histStageSource("ttft", "sglang:time_to_first_token_seconds"),
			histStageSource("itl", "sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
			histStageSource("e2e", "sglang:e2e_request_latency_seconds"),
		},
	}
}

// tgiDialect: durations are in seconds although the names lack the suffix.
// TGI has no KV gauge, no TTFT and no ITL histogram; its prefill and decode
// histograms time whole batches' forward passes, not requests.
func tgiDialect() Dialect {
	return Dialect{
		Name:         TGI,
		Waiting:      metricRefs("tgi_queue_size"),
		Running:      metricRefs("tgi_batch_current_size"),
		PromptTokens: metricRefs("tgi_request_input_length"),
		GenTokens:    metricRefs("tgi_request_generated_tokens"),
		Stages: []StageSource{
			histStageSource("tokenize", "tgi_request_validation_duration"),
			histStageSource("queue", "tgi_request_queue_duration"),
			{Stage: "prefill", Hist: []MetricRef{{Name: "tgi_batch_forward_duration", Label: "method", Value: "prefill"}}},
			{Stage: "decode", Hist: []MetricRef{{Name: "tgi_batch_forward_duration", Label: "method", Value: "decode"}}},
			histStageSource("inference", "tgi_request_inference_duration"),
			histStageSource("tpot", "tgi_request_mean_time_per_token_duration"),
			histStageSource("e2e", "tgi_request_duration"),
		},
	}
}

// llamacppDialect: llama.cpp has no histograms and counts no requests;
// its prompt and generation counters give means per token (seconds over
// tokens), so they are keyed "prefill_per_token" and "decode_per_token"
// (see event.PerTokenSuffix), never "prefill" and "decode".
func llamacppDialect() Dialect {
	return Dialect{
		Name:         LlamaCpp,
		Waiting:      metricRefs("llamacpp:requests_deferred"),
		Running:      metricRefs("llamacpp:requests_processing"),
		PromptTokens: metricRefs("llamacpp:prompt_tokens_total"),
		GenTokens:    metricRefs("llamacpp:tokens_predicted_total"),
		// prompt_tokens_total counts the tokens evaluated, cached ones
		// excluded: the prefix cache's misses.
		PrefixHits:   metricRefs("llamacpp:prompt_tokens_cached_total"),
		PrefixMisses: metricRefs("llamacpp:prompt_tokens_total"),
		Stages: []StageSource{
			{Stage: "prefill" + event.PerTokenSuffix, Sum: MetricRef{Name: "llamacpp:prompt_seconds_total"}, Count: MetricRef{Name: "llamacpp:prompt_tokens_total"}},
			{Stage: "decode" + event.PerTokenSuffix, Sum: MetricRef{Name: "llamacpp:tokens_predicted_seconds_total"}, Count: MetricRef{Name: "llamacpp:tokens_predicted_total"}},
		},
	}
}

// tritonDialect covers Triton core and the TensorRT-LLM backend's gauges.
// Triton's latencies are cumulative µs counters: the means are per
// successful request. The TTFT histogram (in ms) exists only when enabled.
func tritonDialect() Dialect {
	const us = 1e-6
	success := MetricRef{Name: "nv_inference_request_success"}
	return Dialect{
		Name: Triton,
		Waiting: []MetricRef{
			{Name: "nv_trt_llm_request_metrics", Label: "request_type", Value: "waiting"},
			{Name: "nv_inference_pending_request_count"},
		},
		Running: []MetricRef{{Name: "nv_trt_llm_request_metrics", Label: "request_type", Value: "active"}},
		KVUsed:  MetricRef{Name: "nv_trt_llm_kv_cache_block_metrics", Label: "kv_cache_block_type", Value: "used"},
		KVTotal: MetricRef{Name: "nv_trt_llm_kv_cache_block_metrics", Label: "kv_cache_block_type", Value: "max"},
		Stages: []StageSource{
			{Stage: "queue", Sum: MetricRef{Name: "nv_inference_queue_duration_us"}, Count: success, Scale: us},
			{Stage: "tokenize", Sum: MetricRef{Name: "nv_inference_compute_input_duration_us"}, Count: success, Scale: us},
			{Stage: "inference", Sum: MetricRef{Name: "nv_inference_compute_infer_duration_us"}, Count: success, Scale: us},
			{Stage: "e2e", Sum: MetricRef{Name: "nv_inference_request_duration_us"}, Count: success, Scale: us},
			{Stage: "ttft", Hist: metricRefs("nv_inference_first_response_histogram_ms"), Scale: 1e-3},
		},
	}
}

// trtllmDialect is trtllm-serve's own /prometheus/metrics page.
func trtllmDialect() Dialect {
	return Dialect{
		Name:          TRTLLM,
		Waiting:       metricRefs("trtllm_num_requests_waiting"),
		Running:       metricRefs("trtllm_num_requests_running"),
		KVFraction:    metricRefs("trtllm_kv_cache_utilization"),
		PromptTokens:  metricRefs("trtllm_prompt_tokens_total"),
		GenTokens:     metricRefs("trtllm_generation_tokens_total"),
		PrefixHitRate: metricRefs("trtllm_kv_cache_hit_rate"),
		Stages: []StageSource{
			histStageSource("queue", "trtllm_request_queue_time_seconds"),
			histStageSource("prefill", "trtllm_request_prefill_time_seconds"),
			histStageSource("decode", "trtllm_request_decode_time_seconds"),
			histStageSource("inference", "trtllm_request_inference_time_seconds"),
			histStageSource("ttft", "trtllm_time_to_first_token_seconds"),
			histStageSource("tpot", "trtllm_time_per_output_token_seconds"),
			histStageSource("e2e", "trtllm_e2e_request_latency_seconds"),
		},
	}
}

// lmdeployDialect: note the ITL histogram's name has no _seconds suffix.
func lmdeployDialect() Dialect {
	return Dialect{
		Name:          LMDeploy,
		Waiting:       metricRefs("lmdeploy:num_requests_waiting"),
		Running:       metricRefs("lmdeploy:num_requests_running"),
		KVFraction:    metricRefs("lmdeploy:gpu_cache_usage_perc"),
		PromptTokens:  metricRefs("lmdeploy:prompt_tokens_total"),
		GenTokens:     metricRefs("lmdeploy:generation_tokens_total"),
		PrefixHitRate: metricRefs("lmdeploy:prefix_cache_hit_rate"),
		Stages: []StageSource{
			histStageSource("queue", "lmdeploy:request_queue_time_seconds"),
			histStageSource("prefill", "lmdeploy:request_prefill_time_seconds"),
			histStageSource("decode", "lmdeploy:request_decode_time_seconds"),
			histStageSource("inference", "lmdeploy:request_inference_time_seconds"),
			histStageSource("ttft", "lmdeploy:time_to_first_token_seconds"),
			histStageSource("itl", "lmdeploy:iter_token_latency"),
			histStageSource("tpot", "lmdeploy:time_per_output_token_seconds"),
			histStageSource("e2e", "lmdeploy:e2e_request_latency_seconds"),
		},
	}
}
