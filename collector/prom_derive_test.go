package collector

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/promdialect"
)

// promFixtureCase is one dialect's pair of fixture scrapes and every number
// Derive must get from them. The expected statistics are worked out by hand
// from the bucket deltas between the two files (see the comments).
type promFixtureCase struct {
	name    string // fixture prefix: <name>_a.prom, <name>_b.prom
	dt      time.Duration
	dialect string

	waiting, running, kv, promptTPS, genTPS *float64
	stages                                  map[string]event.HistStat
	gauges                                  map[string]float64 // must be present with these values
	noGauges                                []string           // must be absent
}

// promFixtureCases are the parsers' fixtures and what each must give.
var promFixtureCases = []promFixtureCase{{
	name: "vllm_v1", dt: 2 * time.Second, dialect: promdialect.VLLM,
	waiting: promF(2), running: promF(4), kv: promF(0.375),
	promptTPS: promF(2560.0 / 2), genTPS: promF(800.0 / 2),
	stages: map[string]event.HistStat{
		// 10 new: 5 in (0.04,0.06], 4 in (0.06,0.08], 1 in (0.25,0.5]; sum +0.8.
		// p50: rank 5 ends the 0.06 bucket → 0.06. p90: rank 9 ends the 0.08
		// bucket → 0.08. p99: rank 9.9 is 0.9 of the way through (0.25,0.5].
		"ttft": {Count: 10, Mean: promSec(0.08), P50: promSec(0.06), P90: promSec(0.08), P99: promSec(0.25 + 0.25*0.9)},
		// 1000 new: 500 in (0.01,0.025], 400 in (0.025,0.05], 100 in (0.05,0.075]; sum +30.
		// p99: rank 990 is 90 of the 100 in (0.05,0.075].
		"itl": {Count: 1000, Mean: promSec(0.03), P50: promSec(0.025), P90: promSec(0.05), P99: promSec(0.05 + 0.025*0.9)},
		// 10 new: 8 in (0,0.3], 2 in (0.3,0.5]; sum +1.0.
		// p50: rank 5 of 8 in the first bucket → 0.3·5/8. p90: rank 9 → 0.3+0.2·(1/2).
		"queue":     {Count: 10, Mean: promSec(0.1), P50: promSec(0.3 * 5 / 8), P90: promSec(0.4), P99: promSec(0.3 + 0.2*1.9/2)},
		"prefill":   promOneBucket(10, 0.5, 0, 0.3),
		"decode":    promOneBucket(10, 22, 2.0, 2.5),
		"inference": promOneBucket(10, 22.5, 2.0, 2.5),
		"e2e":       promOneBucket(10, 30, 2.5, 5.0),
		"tpot":      promOneBucket(10, 0.3, 0.025, 0.05),
	},
	gauges: map[string]float64{
		"vllm:num_requests_waiting":     2,
		"process_resident_memory_bytes": 2.147483648e9,
		`vllm:num_requests_waiting_by_reason{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct",reason="capacity"}`: 2,
	},
	noGauges: []string{"http_requests_created", "vllm:prompt_tokens_created", "vllm:time_to_first_token_seconds_created"},
}, {
	name: "vllm_v0", dt: 5 * time.Second, dialect: promdialect.VLLMv0,
	waiting: promF(1), running: promF(4), kv: promF(0.5),
	promptTPS: promF(1000.0 / 5), genTPS: promF(500.0 / 5),
	stages: map[string]event.HistStat{
		// 4 new: 2 in (0.1,0.25], 2 in (0.25,0.5]; sum +1.0.
		"ttft": {Count: 4, Mean: promSec(0.25), P50: promSec(0.25), P90: promSec(0.25 + 0.25*1.6/2), P99: promSec(0.25 + 0.25*1.96/2)},
		// the old time_per_output_token_seconds histogram stands in for ITL.
		"itl": promOneBucket(100, 2.0, 0.01, 0.025),
		// time_in_queue_requests: 3 new in (0,1], 1 beyond the last bound (60 s);
		// sum +91.5. p90 and p99 land in +Inf and report the highest finite bound.
		"queue": {Count: 4, Mean: promSec(91.5 / 4), P50: promSec(2.0 / 3), P90: promSec(60), P99: promSec(60)},
		"e2e":   promOneBucket(4, 14, 2.5, 5.0),
	},
	gauges: map[string]float64{"vllm:gpu_cache_usage_perc": 0.5, "vllm:num_requests_swapped": 0},
}, {
	name: "sglang", dt: time.Second, dialect: promdialect.SGLang,
	waiting: promF(3), running: promF(8), kv: promF(0.62),
	promptTPS: promF(4096), genTPS: promF(2048),
	stages: map[string]event.HistStat{
		// 5 new: 2 at exactly 0 (the le="0.0" bucket), 2 in (0,0.1], 1 in (0.1,0.2]; sum +0.27.
		// p50: rank 2.5 is 0.5 of the 2 in (0,0.1] → 0.025.
		"queue": {Count: 5, Mean: promSec(0.054), P50: promSec(0.025), P90: promSec(0.15), P99: promSec(0.195)},
		// 8 new: 4 in (0.1,0.2], 4 in (0.2,0.4]; sum +2.0.
		"ttft": {Count: 8, Mean: promSec(0.25), P50: promSec(0.2), P90: promSec(0.2 + 0.2*3.2/4), P99: promSec(0.2 + 0.2*3.92/4)},
		// 1000 new: 600 in (0.008,0.010], 400 in (0.010,0.015]; sum +10.
		"itl": {Count: 1000, Mean: promSec(0.01), P50: promSec(0.008 + 0.002*500/600), P90: promSec(0.010 + 0.005*300/400), P99: promSec(0.010 + 0.005*390/400)},
		"e2e": promOneBucket(8, 40, 4, 6),
	},
	gauges: map[string]float64{"sglang:gen_throughput": 512.3, "sglang:num_used_tokens": 50000},
}, {
	name: "tgi", dt: 2 * time.Second, dialect: promdialect.TGI,
	waiting: promF(5), running: promF(16), kv: nil,
	// tokens come from the sums of the per-request token-length histograms
	promptTPS: promF(2000.0 / 2), genTPS: promF(800.0 / 2),
	stages: map[string]event.HistStat{
		"tokenize":  promOneBucket(4, 0.006, tgiBound(6), tgiBound(7)),
		"queue":     promOneBucket(4, 0.5, tgiBound(17), tgiBound(18)),
		"prefill":   promOneBucket(4, 1.6, tgiBound(20), tgiBound(21)),
		"decode":    promOneBucket(200, 5.0, tgiBound(13), tgiBound(14)),
		"inference": promOneBucket(4, 12, tgiBound(25), tgiBound(26)),
		"tpot":      promOneBucket(4, 0.14, tgiBound(14), tgiBound(15)),
		"e2e":       promOneBucket(4, 12.8, tgiBound(25), tgiBound(26)),
	},
	gauges: map[string]float64{"tgi_queue_size": 5, "tgi_batch_current_max_tokens": 8192},
}, {
	name: "llamacpp", dt: 2 * time.Second, dialect: promdialect.LlamaCpp,
	waiting: promF(4), running: promF(3), kv: nil,
	promptTPS: promF(2000.0 / 2), genTPS: promF(100.0 / 2),
	stages: map[string]event.HistStat{
		// +1.0 s over +2000 prompt tokens; +2.0 s over +100 generated tokens.
		// Per token, and named so: never a request's prefill.
		"prefill_per_token": {Count: 2000, Mean: promSec(1.0 / 2000)},
		"decode_per_token":  {Count: 100, Mean: promSec(2.0 / 100)},
	},
	gauges:   map[string]float64{"llamacpp:requests_deferred": 4, "llamacpp:prompt_tokens_seconds": 2000},
	noGauges: []string{"llamacpp:n_busy_slots_per_decode"}, // typed counter
}, {
	name: "triton", dt: 2 * time.Second, dialect: promdialect.Triton,
	// TRT-LLM's waiting count (3) wins over Triton's pending count (1);
	// KV is used/max blocks = 360/1200.
	waiting: promF(3), running: promF(6), kv: promF(0.3),
	stages: map[string]event.HistStat{
		// µs counters over +10 successful requests
		"queue":     {Count: 10, Mean: promSec(500000e-6 / 10)},
		"tokenize":  {Count: 10, Mean: promSec(5000e-6 / 10)},
		"inference": {Count: 10, Mean: promSec(12e6 * 1e-6 / 10)},
		"e2e":       {Count: 10, Mean: promSec(14e6 * 1e-6 / 10)},
		// ms histogram: 6 new in (100,500], 4 in (500,2000]; sum +4000 ms.
		"ttft": {Count: 10, Mean: promSec(0.4), P50: promSec((100 + 400*5.0/6) / 1000), P90: promSec((500 + 1500*3.0/4) / 1000), P99: promSec((500 + 1500*3.9/4) / 1000)},
	},
	gauges: map[string]float64{
		"nv_inference_pending_request_count":                                                  1,
		`nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="waiting",version="1"}`: 3,
	},
}, {
	name: "trtllm", dt: time.Second, dialect: promdialect.TRTLLM,
	waiting: promF(1), running: promF(5), kv: promF(0.4),
	promptTPS: promF(3000), genTPS: promF(600),
	stages: map[string]event.HistStat{
		"ttft":      promOneBucket(6, 1.2, 0.1, 0.25),
		"queue":     promOneBucket(6, 0.3, 0, 0.3),
		"prefill":   promOneBucket(6, 0.9, 0.1, 0.25),
		"decode":    promOneBucket(6, 7.2, 1.0, 1.5),
		"inference": promOneBucket(6, 8.1, 1.0, 1.5),
		"tpot":      promOneBucket(6, 0.12, 0.01, 0.025),
		"e2e":       promOneBucket(6, 8.4, 1.0, 1.5),
	},
	gauges:   map[string]float64{"trtllm_kv_cache_hit_rate": 0.2},
	noGauges: []string{"trtllm_prompt_tokens_created"},
}, {
	name: "lmdeploy", dt: 4 * time.Second, dialect: promdialect.LMDeploy,
	waiting: promF(2), running: promF(7), kv: promF(0.55),
	promptTPS: promF(8000.0 / 4), genTPS: promF(2000.0 / 4),
	stages: map[string]event.HistStat{
		"ttft":      promOneBucket(5, 1.5, 0.25, 0.5),
		"itl":       promOneBucket(500, 7.5, 0.01, 0.025),
		"tpot":      promOneBucket(5, 0.1, 0.01, 0.025),
		"e2e":       promOneBucket(5, 17.5, 2.5, 5.0),
		"queue":     promOneBucket(5, 0.5, 0, 0.3),
		"prefill":   promOneBucket(5, 1.0, 0, 0.3),
		"decode":    promOneBucket(5, 15, 2.5, 5.0),
		"inference": promOneBucket(5, 16, 2.5, 5.0),
	},
	gauges: map[string]float64{"lmdeploy:prefix_cache_hit_rate": 0.3},
}}

func TestDeriveFixtures(t *testing.T) {
	t.Parallel()
	for _, tc := range promFixtureCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prev := promLoad(t, tc.name+"_a.prom", promT0)
			cur := promLoad(t, tc.name+"_b.prom", promT0.Add(tc.dt))
			d := DetectDialect(cur)
			if d.Name != tc.dialect {
				t.Fatalf("dialect = %q, want %q", d.Name, tc.dialect)
			}
			if got := DetectDialect(prev).Name; got != tc.dialect {
				t.Errorf("dialect of the first scrape = %q, want %q", got, tc.dialect)
			}
			got, resets := Derive(prev, cur, d)
			if len(resets) != 0 {
				t.Errorf("resets = %v, want none", resets)
			}
			if got.Dialect != tc.dialect || got.Interval != tc.dt || !got.Time.Equal(cur.Time) || got.Source != cur.Source {
				t.Errorf("header = %q %v %v %q", got.Dialect, got.Interval, got.Time, got.Source)
			}
			promCheckPtr(t, "waiting", got.Waiting, tc.waiting)
			promCheckPtr(t, "running", got.Running, tc.running)
			promCheckPtr(t, "kv", got.KVCache, tc.kv)
			promCheckPtr(t, "prompt tokens/s", got.PromptTokensPerSec, tc.promptTPS)
			promCheckPtr(t, "gen tokens/s", got.GenTokensPerSec, tc.genTPS)
			promCheckStages(t, got.Stages, tc.stages)
			for k, w := range tc.gauges {
				if g, ok := got.Gauges[k]; !ok || !promCloseF(g, w) {
					t.Errorf("gauge %s = %v (present %v), want %v", k, g, ok, w)
				}
			}
			for _, k := range tc.noGauges {
				if _, ok := got.Gauges[k]; ok {
					t.Errorf("gauge %s present, want absent", k)
				}
			}
			for name := range cur.Families {
				if strings.HasSuffix(name, "_created") {
					t.Errorf("family %s kept, want _created dropped", name)
				}
			}
			if _, err := event.Marshal(event.NewServer(&got)); err != nil {
				t.Errorf("marshal: %v", err)
			}
		})
	}
}

// The first scrape has nothing to compare with: gauges only.
func TestDeriveFirstScrapeHasGaugesOnly(t *testing.T) {
	t.Parallel()
	cur := promLoad(t, "vllm_v1_b.prom", promT0)
	got, resets := Derive(nil, cur, DetectDialect(cur))
	promCheckPtr(t, "waiting", got.Waiting, promF(2))
	promCheckPtr(t, "kv", got.KVCache, promF(0.375))
	if got.PromptTokensPerSec != nil || got.GenTokensPerSec != nil || got.Stages != nil || got.Interval != 0 || resets != nil {
		t.Errorf("first sample has interval data: %+v", got)
	}
	if len(got.Gauges) == 0 {
		t.Error("no gauges")
	}
}

// Swapping the fixtures makes every counter go down, as after a restart:
// the new values are the deltas since the restart and the interval is marked.
func TestDeriveCounterReset(t *testing.T) {
	t.Parallel()
	prev := promLoad(t, "llamacpp_b.prom", promT0)
	cur := promLoad(t, "llamacpp_a.prom", promT0.Add(2*time.Second))
	got, resets := Derive(prev, cur, DetectDialect(cur))
	promCheckPtr(t, "prompt tokens/s", got.PromptTokensPerSec, promF(10000.0/2))
	promCheckPtr(t, "gen tokens/s", got.GenTokensPerSec, promF(4000.0/2))
	promCheckStages(t, got.Stages, map[string]event.HistStat{
		"prefill_per_token": {Count: 10000, Mean: promSec(5.0 / 10000)},
		"decode_per_token":  {Count: 4000, Mean: promSec(80.0 / 4000)},
	})
	want := []string{"llamacpp:prompt_seconds_total", "llamacpp:prompt_tokens_total",
		"llamacpp:tokens_predicted_seconds_total", "llamacpp:tokens_predicted_total"}
	if strings.Join(resets, ",") != strings.Join(want, ",") {
		t.Errorf("resets = %v, want %v", resets, want)
	}

	// A histogram whose count goes down is a reset too: the delta is the new histogram.
	const before = `# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1"} 50
vllm:time_to_first_token_seconds_bucket{le="1.0"} 100
vllm:time_to_first_token_seconds_bucket{le="+Inf"} 100
vllm:time_to_first_token_seconds_sum 30
vllm:time_to_first_token_seconds_count 100
`
	const after = `# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1"} 0
vllm:time_to_first_token_seconds_bucket{le="1.0"} 4
vllm:time_to_first_token_seconds_bucket{le="+Inf"} 4
vllm:time_to_first_token_seconds_sum 2
vllm:time_to_first_token_seconds_count 4
`
	p, c := promParseAt(t, before, promT0), promParseAt(t, after, promT0.Add(time.Second))
	got, resets = Derive(p, c, DetectDialect(c))
	promCheckStages(t, got.Stages, map[string]event.HistStat{"ttft": promOneBucket(4, 2, 0.1, 1.0)})
	if len(resets) != 1 || resets[0] != "vllm:time_to_first_token_seconds" {
		t.Errorf("resets = %v", resets)
	}
}

// What a scrape does not carry stays absent; a series new since the previous
// scrape counts from zero.
func TestDeriveMissingSeries(t *testing.T) {
	t.Parallel()
	const before = `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running 1
`
	const after = `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running 2
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total 300
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="1.0"} 2
vllm:e2e_request_latency_seconds_bucket{le="+Inf"} 2
vllm:e2e_request_latency_seconds_sum 1.5
vllm:e2e_request_latency_seconds_count 2
`
	p, c := promParseAt(t, before, promT0), promParseAt(t, after, promT0.Add(3*time.Second))
	got, resets := Derive(p, c, DetectDialect(c))
	if got.Dialect != promdialect.VLLMv0 {
		t.Errorf("dialect %q", got.Dialect)
	}
	promCheckPtr(t, "running", got.Running, promF(2))
	promCheckPtr(t, "waiting", got.Waiting, nil)
	promCheckPtr(t, "kv", got.KVCache, nil)
	promCheckPtr(t, "prompt tokens/s", got.PromptTokensPerSec, promF(100))
	promCheckPtr(t, "gen tokens/s", got.GenTokensPerSec, nil)
	promCheckStages(t, got.Stages, map[string]event.HistStat{"e2e": promOneBucket(2, 1.5, 0, 1.0)})
	if len(resets) != 0 {
		t.Errorf("resets = %v", resets)
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"waiting"`, `"kv_cache"`, `"gen_tps"`, `"ttft"`} {
		if strings.Contains(string(b), key) {
			t.Errorf("JSON has %s for an absent value: %s", key, b)
		}
	}
}

// Two models on one server: by default gauges, counters and histograms are
// summed (KV fractions averaged); with a model filter only that model counts.
func TestDeriveTwoModels(t *testing.T) {
	t.Parallel()
	page := func(aCount, bCount int, aSum, bSum float64, aTokens, bTokens int) string {
		var sb strings.Builder
		sb.WriteString("# TYPE vllm:num_requests_waiting gauge\n")
		sb.WriteString(`vllm:num_requests_waiting{engine="0",model_name="a"} 2` + "\n")
		sb.WriteString(`vllm:num_requests_waiting{engine="0",model_name="b"} 5` + "\n")
		sb.WriteString("# TYPE vllm:kv_cache_usage_perc gauge\n")
		sb.WriteString(`vllm:kv_cache_usage_perc{engine="0",model_name="a"} 0.2` + "\n")
		sb.WriteString(`vllm:kv_cache_usage_perc{engine="0",model_name="b"} 0.6` + "\n")
		sb.WriteString("# TYPE vllm:prompt_tokens_total counter\n")
		sb.WriteString(`vllm:prompt_tokens_total{engine="0",model_name="a"} ` + strconv.Itoa(aTokens) + "\n")
		sb.WriteString(`vllm:prompt_tokens_total{engine="0",model_name="b"} ` + strconv.Itoa(bTokens) + "\n")
		sb.WriteString("# TYPE vllm:request_queue_time_seconds histogram\n")
		for _, m := range []struct {
			name  string
			count int
			sum   float64
		}{{"a", aCount, aSum}, {"b", bCount, bSum}} {
			// model a's observations all fall in (0,0.3], model b's in (0.3,0.5]
			lowCount, highCount := m.count, m.count
			if m.name == "b" {
				lowCount = 0
			}
			l := `{engine="0",model_name="` + m.name + `"`
			sb.WriteString("vllm:request_queue_time_seconds_bucket" + l + `,le="0.3"} ` + strconv.Itoa(lowCount) + "\n")
			sb.WriteString("vllm:request_queue_time_seconds_bucket" + l + `,le="0.5"} ` + strconv.Itoa(highCount) + "\n")
			sb.WriteString("vllm:request_queue_time_seconds_bucket" + l + `,le="+Inf"} ` + strconv.Itoa(highCount) + "\n")
			sb.WriteString("vllm:request_queue_time_seconds_sum" + l + "} " + strconv.FormatFloat(m.sum, 'g', -1, 64) + "\n")
			sb.WriteString("vllm:request_queue_time_seconds_count" + l + "} " + strconv.Itoa(m.count) + "\n")
		}
		return sb.String()
	}
	prev := promParseAt(t, page(10, 10, 1, 4, 100, 1000), promT0)
	cur := promParseAt(t, page(14, 16, 1.4, 6.4, 300, 1400), promT0.Add(2*time.Second))
	d := DetectDialect(cur)

	got, _ := Derive(prev, cur, d)
	promCheckPtr(t, "waiting", got.Waiting, promF(7))
	promCheckPtr(t, "kv", got.KVCache, promF(0.4))
	promCheckPtr(t, "prompt tokens/s", got.PromptTokensPerSec, promF((200.0+400.0)/2))
	// 4 new in (0,0.3] from a, 6 new in (0.3,0.5] from b; sum +0.4 +2.4.
	// p50: rank 5 is 1 of the 6 in (0.3,0.5].
	promCheckStages(t, got.Stages, map[string]event.HistStat{
		"queue": {Count: 10, Mean: promSec(2.8 / 10), P50: promSec(0.3 + 0.2*1/6), P90: promSec(0.3 + 0.2*5/6), P99: promSec(0.3 + 0.2*5.9/6)},
	})
	if _, ok := got.Gauges[`vllm:num_requests_waiting{engine="0",model_name="b"}`]; !ok {
		t.Errorf("gauges should list each model: %v", got.Gauges)
	}

	gotB, _ := Derive(FilterModel(prev, "b"), FilterModel(cur, "b"), d)
	promCheckPtr(t, "waiting(b)", gotB.Waiting, promF(5))
	promCheckPtr(t, "kv(b)", gotB.KVCache, promF(0.6))
	promCheckPtr(t, "prompt tokens/s(b)", gotB.PromptTokensPerSec, promF(200))
	promCheckStages(t, gotB.Stages, map[string]event.HistStat{"queue": promOneBucket(6, 2.4, 0.3, 0.5)})
	if v, ok := gotB.Gauges["vllm:num_requests_waiting"]; !ok || v != 5 {
		t.Errorf("filtered gauges = %v", gotB.Gauges)
	}
}

// NaN and infinite values are dropped at parsing: the stats they feed are
// absent, and the sample still encodes as JSON.
func TestDeriveNaN(t *testing.T) {
	t.Parallel()
	const page = `# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting NaN
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running +Inf
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc 0.5
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total NaN
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1"} 1
vllm:time_to_first_token_seconds_bucket{le="+Inf"} 1
vllm:time_to_first_token_seconds_sum NaN
vllm:time_to_first_token_seconds_count 1
# TYPE other gauge
other -Inf
`
	prev := promParseAt(t, page, promT0)
	cur := promParseAt(t, page, promT0.Add(time.Second))
	got, _ := Derive(prev, cur, DetectDialect(cur))
	promCheckPtr(t, "waiting", got.Waiting, nil)
	promCheckPtr(t, "running", got.Running, nil)
	promCheckPtr(t, "kv", got.KVCache, promF(0.5))
	promCheckPtr(t, "prompt tokens/s", got.PromptTokensPerSec, nil)
	if len(got.Stages) != 0 {
		t.Errorf("stages = %v, want none", got.Stages)
	}
	if _, ok := got.Gauges["other"]; ok {
		t.Error("infinite gauge kept")
	}
	if _, err := json.Marshal(event.NewServer(&got)); err != nil {
		t.Errorf("marshal: %v", err)
	}
}

// A histogram whose bounds differ between series (or a summary) still merges.
func TestMergeHists(t *testing.T) {
	t.Parallel()
	inf := math.Inf(1)
	a := &PromHist{Count: 2, Sum: 1, Buckets: []PromBucket{{0.5, 1}, {1, 2}, {inf, 2}}}
	b := &PromHist{Count: 3, Sum: 2, Buckets: []PromBucket{{1, 3}, {inf, 3}}}
	got := mergeHists([]*PromHist{a, b})
	want := []PromBucket{{0.5, 1}, {1, 5}, {inf, 5}}
	if got.Count != 5 || got.Sum != 3 || len(got.Buckets) != len(want) {
		t.Fatalf("merged = %+v", got)
	}
	for i := range want {
		if got.Buckets[i] != want[i] {
			t.Errorf("bucket %d = %+v, want %+v", i, got.Buckets[i], want[i])
		}
	}
	// a summary (no buckets) leaves the merge with means only
	s := mergeHists([]*PromHist{a, {Count: 1, Sum: 5}})
	if s.Count != 3 || s.Sum != 6 || s.Buckets != nil {
		t.Errorf("with a summary = %+v", s)
	}
}

func TestBucketQuantile(t *testing.T) {
	t.Parallel()
	inf := math.Inf(1)
	cases := []struct {
		name    string
		q       float64
		buckets []PromBucket
		want    float64
		ok      bool
	}{
		{"empty", 0.5, nil, 0, false},
		{"no observations", 0.5, []PromBucket{{1, 0}, {inf, 0}}, 0, false},
		{"first bucket from zero", 0.5, []PromBucket{{1, 4}, {inf, 4}}, 0.5, true},
		{"between buckets", 0.75, []PromBucket{{1, 2}, {3, 4}, {inf, 4}}, 2, true},
		{"+Inf maps to highest finite bound", 0.99, []PromBucket{{1, 2}, {10, 3}, {inf, 100}}, 10, true},
		{"only +Inf", 0.5, []PromBucket{{inf, 3}}, 0, false},
		{"bound at zero", 0.5, []PromBucket{{0, 3}, {1, 4}, {inf, 4}}, 0, true},
		{"negative bound first", 0.1, []PromBucket{{-1, 3}, {1, 4}, {inf, 4}}, -1, true},
		{"non-monotonic counts", 0.5, []PromBucket{{1, 4}, {2, 2}, {inf, 4}}, 0.5, true},
	}
	for _, tc := range cases {
		got, ok := bucketQuantile(tc.q, tc.buckets)
		if ok != tc.ok || (ok && !promCloseF(got, tc.want)) {
			t.Errorf("%s: got %v %v, want %v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestDurationFromSecondsClamps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   float64
		want time.Duration
	}{{1.5, 1500 * time.Millisecond}, {math.NaN(), 0}, {1e300, math.MaxInt64}, {-1e300, math.MinInt64}} {
		if got := durationFromSeconds(tc.in); got != tc.want {
			t.Errorf("durationFromSeconds(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// FuzzParseDerive feeds arbitrary text as one scrape and as a pair: no
// panic, and whatever comes out encodes as JSON (so holds no NaN or Inf).
// The seeds are the fixtures cut into pieces of a few families: small
// inputs keep the fuzzer fast (it minimises every new input it finds).
func FuzzParseDerive(f *testing.F) {
	entries, err := os.ReadDir(filepath.Join("testdata", "prom"))
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), "_a.prom") {
			continue
		}
		a := promFamilyChunks(promFixture(f, e.Name()), 25)
		b := promFamilyChunks(promFixture(f, strings.Replace(e.Name(), "_a.prom", "_b.prom", 1)), 25)
		for i := range min(len(a), len(b)) {
			f.Add(a[i], b[i])
		}
	}
	f.Add("a 1\n", "a 2\n")
	f.Add("# TYPE h histogram\nh_bucket{le=\"1\"} 5\nh_sum 1e308\nh_count 5\n", "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"2\"} 9\nh_sum -1e308\nh_count 2\n")
	f.Add("x NaN\n", "x{a=\"1\"} -Inf\n")
	f.Fuzz(func(t *testing.T, a, b string) {
		prev, errA := ParseProm(strings.NewReader(a))
		cur, errB := ParseProm(strings.NewReader(b))
		if errA == nil {
			prev.Time = promT0
			s, _ := Derive(nil, prev, DetectDialect(prev))
			promFuzzCheck(t, s)
		}
		if errA != nil || errB != nil {
			return
		}
		cur.Time = promT0.Add(time.Second)
		s, _ := Derive(prev, cur, DetectDialect(cur))
		promFuzzCheck(t, s)
		for _, name := range promdialect.Names() {
			d, err := promdialect.ByName(name)
			if err != nil {
				t.Fatal(err)
			}
			s, _ := Derive(prev, cur, d)
			promFuzzCheck(t, s)
		}
	})
}

// promFamilyChunks cuts a page into pieces of about maxLines lines, each
// starting at a family's HELP or TYPE line.
func promFamilyChunks(text string, maxLines int) []string {
	var chunks []string
	var cur []string
	prev := ""
	for _, line := range strings.SplitAfter(text, "\n") {
		start := strings.HasPrefix(line, "# HELP") || (strings.HasPrefix(line, "# TYPE") && !strings.HasPrefix(prev, "# HELP"))
		if start && len(cur) >= maxLines {
			chunks = append(chunks, strings.Join(cur, ""))
			cur = nil
		}
		if line != "" {
			cur = append(cur, line)
		}
		prev = line
	}
	if len(cur) > 0 {
		chunks = append(chunks, strings.Join(cur, ""))
	}
	return chunks
}

func promFuzzCheck(t *testing.T, s event.ServerSample) {
	t.Helper()
	if _, err := json.Marshal(event.NewServer(&s)); err != nil {
		t.Fatalf("marshal: %v", err)
	}
}

// promT0 is the time of every test's first scrape.
var promT0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func promFixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "prom", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// promLoad parses a fixture as if scraped at the given time.
func promLoad(t testing.TB, name string, at time.Time) *Scrape {
	t.Helper()
	return promParseAt(t, promFixture(t, name), at)
}

func promParseAt(t testing.TB, text string, at time.Time) *Scrape {
	t.Helper()
	s, err := ParseProm(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	s.Time = at
	s.Source = "http://test/metrics"
	return s
}

func promF(x float64) *float64 { return &x }

func promSec(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

// promOneBucket is the statistic of count observations summing to sum that all
// fell in the bucket (lo, hi]: the quantiles interpolate within that bucket.
func promOneBucket(count, sum, lo, hi float64) event.HistStat {
	return event.HistStat{
		Count: count,
		Mean:  promSec(sum / count),
		P50:   promSec(lo + (hi-lo)*0.5),
		P90:   promSec(lo + (hi-lo)*0.9),
		P99:   promSec(lo + (hi-lo)*0.99),
	}
}

// tgiBound is TGI's k-th duration bucket bound, 0.0001·1.5^k seconds.
func tgiBound(k int) float64 { return 0.0001 * math.Pow(1.5, float64(k)) }

func promCloseF(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// promCloseD allows 1 µs: the fixtures print bounds and sums in decimal.
func promCloseD(a, b time.Duration) bool {
	d := a - b
	return d >= -time.Microsecond && d <= time.Microsecond
}

func promCheckPtr(t *testing.T, what string, got, want *float64) {
	t.Helper()
	switch {
	case got == nil && want == nil:
	case got == nil || want == nil:
		t.Errorf("%s = %v, want %v", what, promShow(got), promShow(want))
	case !promCloseF(*got, *want):
		t.Errorf("%s = %v, want %v", what, *got, *want)
	}
}

func promShow(p *float64) any {
	if p == nil {
		return "absent"
	}
	return *p
}

func promCheckStages(t *testing.T, got, want map[string]event.HistStat) {
	t.Helper()
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected stage %q: %+v", k, got[k])
		}
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("stage %q missing", k)
			continue
		}
		if !promCloseF(g.Count, w.Count) || !promCloseD(g.Mean, w.Mean) || !promCloseD(g.P50, w.P50) ||
			!promCloseD(g.P90, w.P90) || !promCloseD(g.P99, w.P99) {
			t.Errorf("stage %q:\n got  count=%v mean=%v p50=%v p90=%v p99=%v\n want count=%v mean=%v p50=%v p90=%v p99=%v",
				k, g.Count, g.Mean, g.P50, g.P90, g.P99, w.Count, w.Mean, w.P50, w.P90, w.P99)
		}
	}
}

// llama.cpp counts the prompt tokens its cache served
// (prompt_tokens_cached_total) apart from those it evaluated
// (prompt_tokens_total): the lookups are their sum. The text is a recent
// llama-server's /metrics.
func TestDeriveLlamaCppPrefixCache(t *testing.T) {
	t.Parallel()
	page := func(prompt, cached float64) string {
		return fmt.Sprintf(`# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total %v
# HELP llamacpp:prompt_tokens_cached_total Number of prompt tokens reused from the cache
# TYPE llamacpp:prompt_tokens_cached_total counter
llamacpp:prompt_tokens_cached_total %v
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 2
`, prompt, cached)
	}
	prev := promParseAt(t, page(1000, 200), promT0)
	cur := promParseAt(t, page(1300, 900), promT0.Add(time.Second))
	d := DetectDialect(cur)
	if d.Name != promdialect.LlamaCpp {
		t.Fatalf("dialect %q", d.Name)
	}
	got, _ := Derive(prev, cur, d)
	promCheckPtr(t, "prefix hits", got.PrefixHits, promF(700))
	promCheckPtr(t, "prefix lookups", got.PrefixQueries, promF(1000))
	promCheckPtr(t, "running", got.Running, promF(2))
	// A llama.cpp without the cached counter reports no lookups at all.
	old := promParseAt(t, "# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total 5\n", promT0)
	got, _ = Derive(old, old, d)
	if got.PrefixHits != nil || got.PrefixQueries != nil {
		t.Errorf("without prompt_tokens_cached_total: hits %v, lookups %v, want neither", got.PrefixHits, got.PrefixQueries)
	}
}
