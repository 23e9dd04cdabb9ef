package agent

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// The metric families the agent exports on /metrics. Histograms also
// expose <name>_bucket, <name>_sum and <name>_count series.
const (
	MetricTTFT         = "latscope_ttft_seconds"
	MetricITL          = "latscope_itl_seconds"
	MetricTPOT         = "latscope_tpot_seconds"
	MetricE2E          = "latscope_e2e_seconds"
	MetricStage        = "latscope_stage_seconds"     // label stage: the client stages
	MetricBreakdown    = "latscope_breakdown_seconds" // labels stage, provenance: the TTFT breakdown
	MetricRequests     = "latscope_requests_total"    // label outcome
	MetricOutputTokens = "latscope_output_tokens_total"
	MetricPromptTokens = "latscope_prompt_tokens_total"
	MetricInFlight     = "latscope_probe_in_flight"
	// The probe's own health, as of its latest sample: 1 while the probe,
	// not the server, is the bottleneck (its numbers then say more about
	// the probe's host than about the server), and how late its open loop
	// sent requests.
	MetricProbeLimited   = "latscope_probe_limited"
	MetricSchedLag       = "latscope_probe_sched_lag_p99_seconds"
	MetricEvents         = "latscope_events_published_total" // label kind
	MetricEventsInvalid  = "latscope_events_invalid_total"
	MetricRingEvents     = "latscope_ring_events"
	MetricRingBytes      = "latscope_ring_bytes"
	MetricClients        = "latscope_sse_clients"
	MetricConnections    = "latscope_sse_connections_total"
	MetricClientsDropped = "latscope_sse_clients_dropped_total"
	MetricGaps           = "latscope_sse_gaps_total"
	MetricEventsDropped  = "latscope_sse_events_dropped_total"
	MetricUnauthorized   = "latscope_unauthorized_requests_total" // label path
	MetricUptime         = "latscope_agent_uptime_seconds"
	// Events a consumer of the agent's own pipeline did not get or could
	// not keep, from the Loss records it published; consumer "recorder":
	// events --record could not write (a full disk).
	MetricEventsLost = "latscope_events_lost_total" // label consumer
	// What the inference server's own metrics said, as of the latest scrape,
	// so a fleet dashboard shows each server's queue beside its latency.
	MetricServerWaiting = "latscope_server_requests_waiting"
	MetricServerRunning = "latscope_server_requests_running"
	MetricServerKVCache = "latscope_server_kv_cache_usage_ratio"
	// Requests that met every per-request latency objective of the agent's
	// --slo (aggregate.GoodRequest): the goodput's numerator. Exported only
	// when --slo sets such an objective; without one no request is judged.
	MetricGoodRequests = "latscope_requests_good_total"
	// Always 1; its labels say who this agent says it is (agent_name,
	// agent_region, agent_shard: prefixed so they never clash with the
	// agent, region and shard labels Prometheus' scrape config gives every
	// series) and which objectives judged its good requests (slo).
	MetricAgentInfo = "latscope_agent_info"
)

// Identity says who an agent is, on its latscope_agent_info series.
type Identity struct {
	Name   string // as on dashboards (--name)
	Region string // where it measures from (--region)
	Shard  string // "i/N" when it sends one share of a fleet's load
	SLO    string // the objectives its good requests met (--slo)
}

var histogramFamilies = []string{MetricTTFT, MetricITL, MetricTPOT, MetricE2E, MetricStage, MetricBreakdown}

// MetricNames returns every series name a query may use against the agent's
// /metrics: each family, and each histogram's _bucket, _sum and _count, sorted.
// A dashboard that queries anything else queries something the agent does
// not export.
func MetricNames() []string {
	names := []string{
		MetricRequests, MetricOutputTokens, MetricPromptTokens, MetricInFlight, MetricProbeLimited, MetricSchedLag,
		MetricEvents, MetricEventsInvalid, MetricRingEvents, MetricRingBytes,
		MetricClients, MetricConnections, MetricClientsDropped, MetricGaps,
		MetricEventsDropped, MetricUnauthorized, MetricUptime, MetricEventsLost,
		MetricServerWaiting, MetricServerRunning, MetricServerKVCache,
		MetricGoodRequests, MetricAgentInfo,
	}
	for _, h := range histogramFamilies {
		names = append(names, h, h+"_bucket", h+"_sum", h+"_count")
	}
	slices.Sort(names)
	return names
}

// metrics are one Server's Prometheus metrics, in a registry of its own.
type metrics struct {
	reg *prometheus.Registry

	// self judges the probe's raw samples; Publish may be called from
	// several goroutines.
	selfMu sync.Mutex
	self   *aggregate.SelfJudge

	ttft, itl, tpot, e2e prometheus.Histogram
	stage, breakdown     *prometheus.HistogramVec
	requests             *prometheus.CounterVec
	serverWaiting        prometheus.Gauge
	serverRunning        prometheus.Gauge
	serverKVCache        prometheus.Gauge
	outputTokens         prometheus.Counter
	promptTokens         prometheus.Counter
	inFlight             prometheus.Gauge
	probeLimited         prometheus.Gauge
	schedLag             prometheus.Gauge
	good                 prometheus.Counter          // nil without per-request objectives
	isGood               func(r *event.Request) bool // the goodput's rule, from aggregate

	events        *prometheus.CounterVec
	eventsInvalid prometheus.Counter

	clients        prometheus.Gauge
	connections    prometheus.Counter
	clientsDropped prometheus.Counter
	gaps           prometheus.Counter
	eventsDropped  prometheus.Counter
	unauthorized   *prometheus.CounterVec
	eventsLost     *prometheus.CounterVec
}

// Bucket bounds in seconds, on a 1-2.5-5 scale so that they read well.
var (
	latencyBuckets = scale(0.001, 120)  // TTFT, E2E
	tokenBuckets   = scale(0.0001, 10)  // ITL, TPOT
	stageBuckets   = scale(0.00001, 60) // stages: DNS and serialising take microseconds
)

// scale returns 1, 2.5, 5 × powers of ten from lo up to at least hi.
func scale(lo, hi float64) []float64 {
	var out []float64
	for d := lo; ; d *= 10 {
		for _, m := range []float64{1, 2.5, 5} {
			out = append(out, d*m)
			if d*m >= hi {
				return out
			}
		}
	}
}

// Native (sparse) histograms beside the classic buckets: a Prometheus that
// scrapes them (--enable-feature=native-histograms, scrape_classic_histograms
// to keep both) gets buckets about 10% wide wherever the latencies fall,
// where the classic 1-2.5-5 buckets are up to 2.5x wide. Other scrapers see
// the classic buckets only.
const (
	nativeBucketFactor = 1.1
	nativeMaxBuckets   = 160
	nativeMinReset     = time.Hour
)

func newMetrics(ring *ring, uptime func() time.Duration, id Identity, isGood func(*event.Request) bool) *metrics {
	hist := func(name, help string, b []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: b,
			NativeHistogramBucketFactor: nativeBucketFactor, NativeHistogramMaxBucketNumber: nativeMaxBuckets,
			NativeHistogramMinResetDuration: nativeMinReset})
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m := &metrics{
		self: aggregate.NewSelfJudge(),
		reg:  prometheus.NewRegistry(),
		ttft: hist(MetricTTFT, "Time to first token of successful requests, from the intended send time.", latencyBuckets),
		itl:  hist(MetricITL, "Gaps between consecutive content chunks of successful requests.", tokenBuckets),
		tpot: hist(MetricTPOT, "Time per output token after the first, per successful request.", tokenBuckets),
		e2e:  hist(MetricE2E, "End-to-end latency of successful requests, from the intended send time.", latencyBuckets),
		stage: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricStage,
			Help: "Client-measured stages up to the first token, by latscope's stage names.", Buckets: stageBuckets},
			[]string{"stage"}),
		breakdown: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricBreakdown,
			Help: "Where the time to first token went, by stage and by where each number came from.", Buckets: stageBuckets},
			[]string{"stage", "provenance"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricRequests,
			Help: "Finished probe requests by outcome (warm-up excluded)."}, []string{"outcome"}),
		outputTokens: counter(MetricOutputTokens, "Output tokens received (warm-up excluded)."),
		promptTokens: counter(MetricPromptTokens, "Prompt tokens sent, as the server counted them where it said (warm-up excluded)."),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricInFlight,
			Help: "Requests the probe has in flight, as of its latest sample."}),
		probeLimited: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricProbeLimited,
			Help: "1 while the probe itself is the bottleneck (CPU, scheduling lag, its own limits), as of its latest sample; 0 otherwise."}),
		schedLag: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricSchedLag,
			Help: "How late the open loop sent requests (p99 over the probe's recent window), as of its latest sample."}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricEvents,
			Help: "Events published to the stream, by kind."}, []string{"kind"}),
		eventsInvalid:  counter(MetricEventsInvalid, "Events refused because they did not encode."),
		clients:        prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricClients, Help: "Event-stream clients connected now."}),
		connections:    counter(MetricConnections, "Event-stream connections accepted."),
		clientsDropped: counter(MetricClientsDropped, "Event-stream clients disconnected because a write failed or timed out."),
		gaps:           counter(MetricGaps, "Gap records sent to clients that asked for events the ring no longer held."),
		eventsDropped:  counter(MetricEventsDropped, "Events announced as lost in gap records."),
		unauthorized: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricUnauthorized,
			Help: "Requests refused with 401 for a missing or wrong token, by path."}, []string{"path"}),
		eventsLost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricEventsLost,
			Help: "Events a consumer of the agent's pipeline did not get or could not keep, from its Loss records (recorder: not written by --record)."},
			[]string{"consumer"}),
		serverWaiting: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricServerWaiting,
			Help: "Requests waiting in the inference server's queue, from its own metrics (latest scrape)."}),
		serverRunning: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricServerRunning,
			Help: "Requests in the inference server's running batch, from its own metrics (latest scrape)."}),
		serverKVCache: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricServerKVCache,
			Help: "The inference server's KV cache use, 0 to 1, from its own metrics (latest scrape)."}),
	}
	m.reg.MustRegister(m.ttft, m.itl, m.tpot, m.e2e, m.stage, m.breakdown, m.requests,
		m.outputTokens, m.promptTokens, m.inFlight, m.probeLimited, m.schedLag, m.events, m.eventsInvalid,
		m.clients, m.connections, m.clientsDropped, m.gaps, m.eventsDropped, m.unauthorized, m.eventsLost,
		m.serverWaiting, m.serverRunning, m.serverKVCache,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricRingEvents, Help: "Events the replay ring holds."},
			func() float64 { return float64(ring.stats().Events) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricRingBytes, Help: "Encoded bytes the replay ring holds."},
			func() float64 { return float64(ring.stats().Bytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricUptime, Help: "Seconds since the agent started."},
			func() float64 { return uptime().Seconds() }),
	)
	info := prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricAgentInfo,
		Help:        "Always 1: who this agent says it is (agent_name, agent_region, agent_shard) and the objectives its good requests met (slo).",
		ConstLabels: prometheus.Labels{"agent_name": id.Name, "agent_region": id.Region, "agent_shard": id.Shard, "slo": id.SLO}})
	info.Set(1)
	m.reg.MustRegister(info)
	if isGood != nil {
		m.isGood = isGood
		m.good = counter(MetricGoodRequests, "Requests that met every per-request latency objective of --slo (the goodput's rule); failed requests never do.")
		m.reg.MustRegister(m.good)
	}
	return m
}

// observe records what one published event says about the probe.
func (m *metrics) observe(ev event.Event) {
	m.events.WithLabelValues(string(ev.Kind)).Inc()
	switch {
	case ev.Request != nil:
		m.observeRequest(ev.Request)
	case ev.Probe != nil:
		p := m.judge(ev.Probe)
		m.inFlight.Set(float64(p.InFlight))
		m.probeLimited.Set(boolGauge(p.Limited))
		m.schedLag.Set(max(p.SchedLagP99, 0).Seconds())
	case ev.Loss != nil:
		m.eventsLost.WithLabelValues(lossLabel(ev.Loss.Consumer)).Add(float64(max(ev.Loss.Events, 0)))
	case ev.Server != nil && !ev.Server.Stale:
		setIf(m.serverWaiting, ev.Server.Waiting)
		setIf(m.serverRunning, ev.Server.Running)
		setIf(m.serverKVCache, ev.Server.KVCache)
	}
}

// judge is p as the aggregator judges it: a raw sample's scheduling lag
// and limit are derived from its evidence (aggregate.SelfJudge).
func (m *metrics) judge(p *event.ProbeSample) *event.ProbeSample {
	m.selfMu.Lock()
	defer m.selfMu.Unlock()
	judged, _ := m.self.Judge(p)
	return judged
}

// observeRequest follows the aggregator's rules: warm-up requests are left
// out, every request is counted by outcome, latencies come from successful
// requests only.
func (m *metrics) observeRequest(r *event.Request) {
	if r.Warmup || r.HasFlag(event.FlagServerReported) { // a user's, from the server's span: not the probe's
		return
	}
	m.requests.WithLabelValues(string(r.Outcome)).Inc()
	m.outputTokens.Add(float64(max(r.OutputTokens, 0)))
	m.promptTokens.Add(float64(max(r.PromptTokens, 0)))
	if m.good != nil && m.isGood(r) {
		m.good.Inc()
	}
	if !r.OK() {
		return
	}
	observePositive(m.ttft, r.TTFT)
	observePositive(m.e2e, r.E2E)
	observePositive(m.tpot, r.TPOT())
	for i := 1; i < len(r.Chunks); i++ {
		m.itl.Observe((r.Chunks[i].At - r.Chunks[i-1].At).Seconds())
	}
	for _, st := range r.Stages {
		m.stage.WithLabelValues(string(st.Stage)).Observe(st.Duration.Seconds())
	}
	for _, st := range r.Breakdown {
		m.breakdown.WithLabelValues(string(st.Stage), string(st.Provenance)).Observe(st.Duration.Seconds())
	}
}

func observePositive(h prometheus.Histogram, d time.Duration) {
	if d > 0 {
		h.Observe(d.Seconds())
	}
}

func setIf(g prometheus.Gauge, v *float64) {
	if v != nil {
		g.Set(*v)
	}
}

// lossLabel bounds the consumer label to the names latscope's own pipeline
// uses, so a malformed event cannot grow the series without limit.
func lossLabel(consumer string) string {
	switch consumer {
	case event.ConsumerRecorder, "dashboard", "aggregator", "agent":
		return consumer
	}
	return "other"
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
