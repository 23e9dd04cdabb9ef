package collector

import (
	"math"
	"slices"
	"testing"
	"time"
)

// A window's traffic needs more than the interval means: the preemptions,
// the prefix cache's lookups and hits, and each histogram's bucket deltas.
func TestDeriveTrafficFields(t *testing.T) {
	t.Parallel()
	const before = `# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="m"} 3
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 100
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_bucket{engine="0",model_name="m",le="0.1"} 10
vllm:request_queue_time_seconds_bucket{engine="0",model_name="m",le="1.0"} 20
vllm:request_queue_time_seconds_bucket{engine="0",model_name="m",le="+Inf"} 20
vllm:request_queue_time_seconds_sum{engine="0",model_name="m"} 5
vllm:request_queue_time_seconds_count{engine="0",model_name="m"} 20
`
	const after = `# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="m"} 5
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1400
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 200
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_bucket{engine="0",model_name="m",le="0.1"} 12
vllm:request_queue_time_seconds_bucket{engine="0",model_name="m",le="1.0"} 25
vllm:request_queue_time_seconds_bucket{engine="0",model_name="m",le="+Inf"} 26
vllm:request_queue_time_seconds_sum{engine="0",model_name="m"} 12
vllm:request_queue_time_seconds_count{engine="0",model_name="m"} 26
`
	p, c := promParseAt(t, before, promT0), promParseAt(t, after, promT0.Add(time.Second))
	got, _ := Derive(p, c, DetectDialect(c))
	promCheckPtr(t, "preemptions", got.Preemptions, promF(2))
	promCheckPtr(t, "prefix queries", got.PrefixQueries, promF(400))
	promCheckPtr(t, "prefix hits", got.PrefixHits, promF(100))
	if got.PrefixHitRate != nil {
		t.Errorf("prefix hit rate = %v, want none (vLLM has counters)", *got.PrefixHitRate)
	}
	q := got.Stages["queue"]
	if !slices.Equal(q.Bounds, []float64{0.1, 1.0}) || !slices.Equal(q.Counts, []float64{2, 3, 1}) {
		t.Errorf("queue buckets = %v %v, want [0.1 1] [2 3 1]", q.Bounds, q.Counts)
	}
	if d := q.Sum() - 7*time.Second; d < -time.Microsecond || d > time.Microsecond {
		t.Errorf("queue sum = %v, want 7s", q.Sum())
	}

	// The first scrape has no interval: none of them.
	first, _ := Derive(nil, c, DetectDialect(c))
	if first.Preemptions != nil || first.PrefixQueries != nil || first.PrefixHits != nil {
		t.Errorf("first sample has interval counters: %+v", first)
	}
}

// Servers without prefix counters give a hit-rate gauge; it is averaged
// over their series.
func TestDerivePrefixHitRateGauge(t *testing.T) {
	t.Parallel()
	const page = `# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="m",tp_rank="0"} 0.25
sglang:cache_hit_rate{model_name="m",tp_rank="1"} 0.75
`
	c := promParseAt(t, page, promT0)
	got, _ := Derive(nil, c, DetectDialect(c))
	promCheckPtr(t, "prefix hit rate", got.PrefixHitRate, promF(0.5))
}

// Bucket deltas never go negative and need a +Inf bucket and rising bounds.
func TestBucketDeltas(t *testing.T) {
	t.Parallel()
	bounds, counts := bucketDeltas([]PromBucket{{0.1, 5}, {1, 4}, {math.Inf(1), 9}}, 1e-3)
	if !slices.Equal(bounds, []float64{0.1e-3, 1e-3}) || !slices.Equal(counts, []float64{5, 0, 4}) {
		t.Errorf("got %v %v", bounds, counts)
	}
	if b, c := bucketDeltas([]PromBucket{{0.1, 5}, {1, 6}}, 1); b != nil || c != nil {
		t.Errorf("no +Inf bucket: got %v %v", b, c)
	}
	if b, c := bucketDeltas([]PromBucket{{1, 5}, {0.5, 6}, {math.Inf(1), 6}}, 1); b != nil || c != nil {
		t.Errorf("falling bounds: got %v %v", b, c)
	}
}
