package sim

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// vLLM V1's histogram buckets (vllm/v1/metrics/loggers.py).
func ttftBuckets() []float64 {
	return []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
		5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
}

func itlBuckets() []float64 {
	return []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
		5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
}

func requestBuckets() []float64 {
	return []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
		60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
}

// metrics are the server's Prometheus series, with vLLM V1's names and labels,
// on a registry of their own.
type metrics struct {
	reg *prometheus.Registry

	waiting, running, kvUsage      prometheus.Gauge
	ttft, itl, tpot                prometheus.Histogram
	e2e, queue, prefill            prometheus.Histogram
	decode, inference              prometheus.Histogram
	promptTokens, generationTokens prometheus.Counter
	prefixQueries, prefixHits      prometheus.Counter
	preemptions                    prometheus.Counter // never moves: the simulator does not preempt
	success                        *prometheus.CounterVec
}

func newMetrics(model string) *metrics {
	labels := prometheus.Labels{"model_name": model, "engine": "0"}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels})
	}
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, ConstLabels: labels, Buckets: buckets})
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
	}
	m := &metrics{
		reg:              prometheus.NewRegistry(),
		waiting:          gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed."),
		running:          gauge("vllm:num_requests_running", "Number of requests in model execution batches."),
		kvUsage:          gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."),
		ttft:             hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets()),
		itl:              hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itlBuckets()),
		tpot:             hist("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.", itlBuckets()),
		e2e:              hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", requestBuckets()),
		queue:            hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", requestBuckets()),
		prefill:          hist("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", requestBuckets()),
		decode:           hist("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", requestBuckets()),
		inference:        hist("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", requestBuckets()),
		promptTokens:     counter("vllm:prompt_tokens_total", "Number of prefill tokens processed."),
		generationTokens: counter("vllm:generation_tokens_total", "Number of generation tokens processed."),
		prefixQueries:    counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens."),
		prefixHits:       counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens."),
		preemptions:      counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine."),
		success: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:request_success_total",
			Help: "Count of successfully processed requests.", ConstLabels: labels}, []string{"finished_reason"}),
	}
	m.reg.MustRegister(m.waiting, m.running, m.kvUsage, m.ttft, m.itl, m.tpot, m.e2e, m.queue,
		m.prefill, m.decode, m.inference, m.promptTokens, m.generationTokens, m.prefixQueries, m.prefixHits, m.preemptions, m.success)
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
