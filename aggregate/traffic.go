package aggregate

import (
	"math"
	"slices"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/promdialect"
)

// Traffic is what the server's own metrics say of every request it served
// in a window: its users' and any latscope sent (a canary's) alike, since
// a server's histograms do not tell clients apart. Its times are
// server-reported; its quantiles are estimated from histogram buckets, so
// each says between which bounds it falls.
type Traffic struct {
	// Seen: at least one interval of the server's metrics is in the window.
	Seen    bool   `json:"seen"`
	Dialect string `json:"dialect,omitempty"`
	// Span is the time the intervals in the window cover.
	Span time.Duration `json:"span_ns"`

	// Requests counts the requests the server finished in the window (its
	// end-to-end histogram's, else its queue histogram's, observations);
	// HasRequests is false when the server has neither (llama.cpp counts
	// tokens, not requests), and then Requests and ReqPerSec are 0 for
	// "not reported", not for "none".
	Requests    float64 `json:"requests"`
	ReqPerSec   float64 `json:"req_per_s"`
	HasRequests bool    `json:"has_requests"`
	// PromptTokPerSec and GenTokPerSec are the server's token counters'
	// rates; HasTokens says whether it has them.
	PromptTokPerSec float64 `json:"prompt_tok_per_s"`
	GenTokPerSec    float64 `json:"gen_tok_per_s"`
	HasTokens       bool    `json:"has_tokens"`

	// Phases are where the requests' time went: queue, prefill, decode and
	// the rest of end-to-end, each the histogram sums' mean per request and
	// share of the end-to-end total (of the phases' total when the server
	// has no end-to-end histogram). Only the phases the server reports are
	// present, in that order.
	Phases []TrafficPhase `json:"phases,omitempty"`
	// ShareOf names the total the shares are of: "e2e" or "phases".
	ShareOf string `json:"share_of,omitempty"`

	// Quantiles are estimated from the histograms' buckets, keyed "ttft",
	// "itl", "e2e", "queue", "prefill", "decode".
	Quantiles map[string]BucketStats `json:"quantiles,omitempty"`

	QueueDepth    float64 `json:"queue_depth"` // mean of the readings
	HasQueueDepth bool    `json:"has_queue_depth"`
	Running       float64 `json:"running"`
	HasRunning    bool    `json:"has_running"`
	KVCache       float64 `json:"kv_cache"` // mean fraction 0..1
	HasKVCache    bool    `json:"has_kv_cache"`
	// Preemptions counts the requests the server preempted.
	Preemptions    float64 `json:"preemptions"`
	HasPreemptions bool    `json:"has_preemptions"`
	// PrefixHitRate is the share of prompt tokens the prefix cache served:
	// from the server's counters (PrefixFrom "counters") or the mean of
	// its hit-rate gauge ("gauge").
	PrefixHitRate float64 `json:"prefix_hit_rate"`
	PrefixFrom    string  `json:"prefix_from,omitempty"`

	// Spans are the users' requests as the server's own spans give them
	// (--otlp-listen), each request's times exact; nil without any.
	Spans *UserSpans `json:"spans,omitempty"`
}

// The phases of Traffic, in order.
const (
	PhaseQueue   = "queue"
	PhasePrefill = "prefill"
	PhaseDecode  = "decode"
	PhaseRest    = "rest"
)

// TrafficPhase is one phase of the server's requests.
type TrafficPhase struct {
	Name string `json:"name"`
	// Mean is the phase's time per request (the histogram's sum over its
	// count); Total its sum over the window.
	Mean  time.Duration `json:"mean_ns"`
	Total time.Duration `json:"total_ns"`
	// Share is of the end-to-end total (Traffic.ShareOf), 0..1.
	Share float64 `json:"share"`
	// PerToken: the server gives this phase's time per token only
	// (llama.cpp), so Mean is per token and Total is still the sum.
	PerToken bool `json:"per_token,omitempty"`
}

// BucketStats are one histogram's observations in a window: the exact
// count and mean (from its sum), and quantiles estimated from its buckets.
type BucketStats struct {
	Count float64        `json:"count"`
	Mean  time.Duration  `json:"mean_ns"`
	P50   BucketEstimate `json:"p50"`
	P90   BucketEstimate `json:"p90"`
	P99   BucketEstimate `json:"p99"`
}

// BucketEstimate is a quantile estimated from histogram buckets: Value
// interpolates linearly within the bucket that holds it, whose bounds are
// Lower and Upper, so the true quantile is somewhere between them; when
// every observation of the window lies in that one bucket, Value is their
// exact mean instead. Above
// is set when it lies past the last finite bound: Value is then that bound
// and the truth is higher. OK is false when there was nothing to estimate.
type BucketEstimate struct {
	OK    bool          `json:"ok"`
	Value time.Duration `json:"value_ns"`
	Lower time.Duration `json:"lower_ns"`
	Upper time.Duration `json:"upper_ns,omitempty"`
	Above bool          `json:"above,omitempty"`
}

// trafficStages are the ServerSample.Stages keys whose buckets Traffic
// estimates quantiles from.
var trafficStages = []string{"ttft", "itl", "e2e", "queue", "prefill", "decode"}

// histAcc accumulates one stage's interval statistics.
type histAcc struct {
	count, sum float64 // observations and seconds
	bounds     []float64
	counts     []float64
}

func (h *histAcc) add(s event.HistStat) {
	if !(s.Count > 0) || math.IsInf(s.Count, 0) || s.Mean < 0 {
		return
	}
	h.count += s.Count
	h.sum += s.Sum().Seconds()
	if len(s.Counts) != len(s.Bounds)+1 || len(s.Bounds) == 0 {
		return
	}
	if h.counts == nil {
		h.bounds = s.Bounds // shared, never written
		h.counts = make([]float64, len(s.Counts))
	}
	if !slices.Equal(h.bounds, s.Bounds) {
		return // another layout (the server changed): its buckets are left out
	}
	for i, c := range s.Counts {
		if c > 0 && !math.IsInf(c, 0) {
			h.counts[i] += c
		}
	}
}

func (h *histAcc) merge(o *histAcc) {
	h.count += o.count
	h.sum += o.sum
	if o.counts == nil {
		return
	}
	if h.counts == nil {
		h.bounds = o.bounds
		h.counts = make([]float64, len(o.counts))
	}
	if slices.Equal(h.bounds, o.bounds) {
		for i, c := range o.counts {
			h.counts[i] += c
		}
	}
}

// trafficAcc accumulates the server samples of a slot or of the run.
type trafficAcc struct {
	span                      float64 // seconds of intervals
	dialect                   string
	stages                    map[string]*histAcc
	prompt, gen               float64 // tokens
	tokens                    bool
	preempt, prefixQ, prefixH float64
	hasPreempt, hasPrefix     bool
	hitRate                   float64
	hitRateN                  int64
	kv, running, waiting      float64
	kvN, runningN, waitingN   int64
}

func (t *trafficAcc) reset() {
	stages := t.stages
	clear(stages)
	*t = trafficAcc{stages: stages}
}

func (t *trafficAcc) add(x *event.ServerSample) {
	t.dialect = x.Dialect
	meanOf(&t.kv, &t.kvN, x.KVCache)
	meanOf(&t.running, &t.runningN, x.Running)
	meanOf(&t.waiting, &t.waitingN, x.Waiting)
	meanOf(&t.hitRate, &t.hitRateN, x.PrefixHitRate)
	if x.Interval <= 0 {
		return // a first sample: gauges only
	}
	dt := x.Interval.Seconds()
	t.span += dt
	if finite(x.PromptTokensPerSec) || finite(x.GenTokensPerSec) {
		t.tokens = true
		if finite(x.PromptTokensPerSec) {
			t.prompt += *x.PromptTokensPerSec * dt
		}
		if finite(x.GenTokensPerSec) {
			t.gen += *x.GenTokensPerSec * dt
		}
	}
	if finite(x.Preemptions) {
		t.preempt += *x.Preemptions
		t.hasPreempt = true
	}
	if finite(x.PrefixQueries) && finite(x.PrefixHits) {
		t.prefixQ += *x.PrefixQueries
		t.prefixH += *x.PrefixHits
		t.hasPrefix = true
	}
	for name, h := range x.Stages {
		acc := t.stages[name]
		if acc == nil {
			if len(t.stages) >= maxStageKeys {
				continue
			}
			if t.stages == nil {
				t.stages = make(map[string]*histAcc)
			}
			acc = &histAcc{}
			t.stages[name] = acc
		}
		acc.add(h)
	}
}

func meanOf(sum *float64, n *int64, v *float64) {
	if finite(v) {
		*sum += *v
		*n++
	}
}

func (t *trafficAcc) merge(o *trafficAcc) {
	if o.dialect != "" {
		t.dialect = o.dialect
	}
	t.span += o.span
	t.prompt += o.prompt
	t.gen += o.gen
	t.tokens = t.tokens || o.tokens
	t.preempt += o.preempt
	t.hasPreempt = t.hasPreempt || o.hasPreempt
	t.prefixQ += o.prefixQ
	t.prefixH += o.prefixH
	t.hasPrefix = t.hasPrefix || o.hasPrefix
	t.hitRate += o.hitRate
	t.hitRateN += o.hitRateN
	t.kv += o.kv
	t.kvN += o.kvN
	t.running += o.running
	t.runningN += o.runningN
	t.waiting += o.waiting
	t.waitingN += o.waitingN
	for name, h := range o.stages {
		acc := t.stages[name]
		if acc == nil {
			if t.stages == nil {
				t.stages = make(map[string]*histAcc)
			}
			acc = &histAcc{}
			t.stages[name] = acc
		}
		acc.merge(h)
	}
}

// stats derives the window's Traffic.
func (t *trafficAcc) stats() Traffic {
	out := Traffic{Dialect: t.dialect, Span: time.Duration(t.span * float64(time.Second))}
	out.Seen = t.span > 0 || t.kvN > 0 || t.waitingN > 0
	if !out.Seen {
		return out
	}
	out.QueueDepth, out.HasQueueDepth = ratio(t.waiting, float64(t.waitingN))
	out.Running, out.HasRunning = ratio(t.running, float64(t.runningN))
	out.KVCache, out.HasKVCache = ratio(t.kv, float64(t.kvN))
	out.Preemptions, out.HasPreemptions = t.preempt, t.hasPreempt
	switch {
	case t.hasPrefix && t.prefixQ > 0:
		out.PrefixHitRate, out.PrefixFrom = t.prefixH/t.prefixQ, "counters"
	case t.hitRateN > 0:
		out.PrefixHitRate, out.PrefixFrom = t.hitRate/float64(t.hitRateN), "gauge"
	}
	if e2e := t.stages["e2e"]; e2e != nil {
		out.Requests, out.HasRequests = e2e.count, true
	} else if q := t.stages["queue"]; q != nil {
		out.Requests, out.HasRequests = q.count, true
	}
	if t.span > 0 {
		out.ReqPerSec = out.Requests / t.span
		if t.tokens {
			out.PromptTokPerSec, out.GenTokPerSec, out.HasTokens = t.prompt/t.span, t.gen/t.span, true
		}
	}
	out.Phases, out.ShareOf = t.phases()
	for _, name := range trafficStages {
		h := t.stages[name]
		if h == nil || h.count <= 0 {
			continue
		}
		if out.Quantiles == nil {
			out.Quantiles = make(map[string]BucketStats)
		}
		out.Quantiles[name] = h.bucketStats()
	}
	return out
}

func ratio(a, b float64) (float64, bool) {
	if b <= 0 {
		return 0, false
	}
	return a / b, true
}

// phaseSource says which stage keys give a phase: the first present wins.
// TGI's prefill and decode histograms time batches' forward passes, not
// requests, so they are no request's phase.
func (t *trafficAcc) phaseStage(phase string) (*histAcc, bool) {
	batchTimed := t.dialect == promdialect.TGI
	var keys []string
	switch phase {
	case PhaseQueue:
		keys = []string{"queue"}
	case PhasePrefill:
		if !batchTimed {
			keys = []string{"prefill", "prefill" + event.PerTokenSuffix}
		}
	case PhaseDecode:
		if !batchTimed {
			keys = []string{"decode", "decode" + event.PerTokenSuffix}
		}
	}
	for _, k := range keys {
		if h := t.stages[k]; h != nil && h.count > 0 {
			return h, k != phase
		}
	}
	return nil, false
}

// phases splits the window's time into the phases the server reports.
func (t *trafficAcc) phases() ([]TrafficPhase, string) {
	var out []TrafficPhase
	var sum float64
	for _, name := range []string{PhaseQueue, PhasePrefill, PhaseDecode} {
		h, perToken := t.phaseStage(name)
		if h == nil {
			continue
		}
		out = append(out, TrafficPhase{Name: name, Total: secondsDur(h.sum), Mean: secondsDur(h.sum / h.count), PerToken: perToken})
		sum += h.sum
	}
	if len(out) == 0 {
		return nil, ""
	}
	total, of := sum, "phases"
	if e2e := t.stages["e2e"]; e2e != nil && e2e.count > 0 && e2e.sum > 0 {
		total, of = e2e.sum, "e2e"
		rest := math.Max(e2e.sum-sum, 0)
		out = append(out, TrafficPhase{Name: PhaseRest, Total: secondsDur(rest), Mean: secondsDur(rest / e2e.count)})
	}
	if total <= 0 {
		return out, of
	}
	for i := range out {
		out[i].Share = out[i].Total.Seconds() / total
	}
	return out, of
}

func secondsDur(s float64) time.Duration {
	ns := s * float64(time.Second)
	switch {
	case math.IsNaN(ns) || ns <= 0:
		return 0
	case ns >= math.MaxInt64:
		return math.MaxInt64
	}
	return time.Duration(ns)
}

func (h *histAcc) bucketStats() BucketStats {
	b := BucketStats{Count: h.count, Mean: secondsDur(h.sum / h.count)}
	b.P50 = bucketEstimate(0.5, h.bounds, h.counts)
	b.P90 = bucketEstimate(0.9, h.bounds, h.counts)
	b.P99 = bucketEstimate(0.99, h.bounds, h.counts)
	if h.oneBucket() {
		for _, e := range []*BucketEstimate{&b.P50, &b.P90, &b.P99} {
			e.atMean(b.Mean)
		}
	}
	return b
}

// oneBucket: every observation lies in one finite bucket.
func (h *histAcc) oneBucket() bool {
	n := 0
	for i, c := range h.counts {
		if c > 0 {
			if n++; n > 1 || i == len(h.bounds) {
				return false
			}
		}
	}
	return n == 1
}

// atMean sets the estimate of a quantile whose observations all lie in
// its bucket to their mean (the histogram's exact sum over its count),
// when that lies in the bucket: interpolating as if they were spread
// evenly over the bucket would contradict the mean (a 0–300 ms bucket
// whose requests average 42 ms would give a median of 150 ms). The
// bucket's bounds stay: the quantile is still only known to lie in them.
func (e *BucketEstimate) atMean(mean time.Duration) {
	if e.OK && !e.Above && mean >= e.Lower && mean <= e.Upper {
		e.Value = mean
	}
}

// bucketEstimate estimates the q-quantile from per-bucket counts (the last
// one above the last bound) as PromQL's histogram_quantile does: linear
// within the bucket holding the q·total-th observation, the first
// bucket's lower bound being 0.
func bucketEstimate(q float64, bounds, counts []float64) BucketEstimate {
	if len(counts) != len(bounds)+1 || len(bounds) == 0 {
		return BucketEstimate{}
	}
	total := 0.0
	for _, c := range counts {
		total += c
	}
	if !(total > 0) || math.IsInf(total, 0) {
		return BucketEstimate{}
	}
	rank := q * total
	below := 0.0
	for i, c := range counts {
		if below+c < rank && i < len(counts)-1 {
			below += c
			continue
		}
		lower := 0.0
		if i > 0 {
			lower = bounds[i-1]
		}
		if i == len(bounds) {
			return BucketEstimate{OK: true, Value: secondsDur(lower), Lower: secondsDur(lower), Above: true}
		}
		upper := bounds[i]
		v := upper
		if c > 0 {
			v = lower + (upper-lower)*math.Min(math.Max((rank-below)/c, 0), 1)
		}
		return BucketEstimate{OK: true, Value: secondsDur(v), Lower: secondsDur(lower), Upper: secondsDur(upper)}
	}
	return BucketEstimate{}
}
