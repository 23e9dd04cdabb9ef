package collector

import (
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/promdialect"
)

func TestDetectDialect(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"vllm_v1_a.prom":  promdialect.VLLM,
		"vllm_v0_a.prom":  promdialect.VLLMv0,
		"sglang_a.prom":   promdialect.SGLang,
		"tgi_a.prom":      promdialect.TGI,
		"llamacpp_a.prom": promdialect.LlamaCpp,
		"triton_a.prom":   promdialect.Triton,
		"trtllm_a.prom":   promdialect.TRTLLM,
		"lmdeploy_a.prom": promdialect.LMDeploy,
	}
	for file, want := range cases {
		if got := DetectDialect(promLoad(t, file, promT0)).Name; got != want {
			t.Errorf("%s: dialect %q, want %q", file, got, want)
		}
	}
	// early V1 (0.9, 0.10): both KV names, no engine label yet → V1, newer name wins
	const earlyV1 = `vllm:gpu_cache_usage_perc{model_name="m"} 0.9
vllm:kv_cache_usage_perc{model_name="m"} 0.25
`
	s := promParseAt(t, earlyV1, promT0)
	d := DetectDialect(s)
	got, _ := Derive(nil, s, d)
	if d.Name != promdialect.VLLM || got.KVCache == nil || *got.KVCache != 0.25 {
		t.Errorf("early V1: dialect %q kv %v", d.Name, promShow(got.KVCache))
	}
	// Triton with the vLLM backend: the vllm: names are the richer ones
	if d := DetectDialect(promParseAt(t, "nv_inference_pending_request_count 1\nvllm:num_requests_waiting 2\n", promT0)); d.Name != promdialect.VLLMv0 {
		t.Errorf("triton+vllm: %q", d.Name)
	}
	if d := DetectDialect(nil); d.Name != promdialect.Unknown {
		t.Errorf("nil scrape: %q", d.Name)
	}
}

// An unknown server still shows all its gauges by name, and nothing else.
func TestUnknownServerShowsGauges(t *testing.T) {
	t.Parallel()
	const page = `# TYPE queue_depth gauge
queue_depth 3
# TYPE busy gauge
busy{worker="1"} 1
busy{worker="2"} 0
# TYPE served_total counter
served_total 100
`
	prev := promParseAt(t, page, promT0)
	cur := promParseAt(t, page, promT0.Add(time.Second))
	d := DetectDialect(cur)
	if d.Name != promdialect.Unknown {
		t.Fatalf("dialect %q", d.Name)
	}
	got, _ := Derive(prev, cur, d)
	want := map[string]float64{"queue_depth": 3, `busy{worker="1"}`: 1, `busy{worker="2"}`: 0}
	if len(got.Gauges) != len(want) {
		t.Errorf("gauges = %v, want %v", got.Gauges, want)
	}
	for k, v := range want {
		if g, ok := got.Gauges[k]; !ok || g != v {
			t.Errorf("gauge %s = %v %v, want %v", k, g, ok, v)
		}
	}
	if got.Waiting != nil || got.Stages != nil || got.PromptTokensPerSec != nil {
		t.Errorf("unknown dialect derived something: %+v", got)
	}
}

func TestGaugesAreBounded(t *testing.T) {
	t.Parallel()
	var sb strings.Builder
	sb.WriteString("# TYPE many gauge\n")
	for i := range 3 * maxGauges {
		sb.WriteString("many{i=\"" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + "\",n=\"" + time.Duration(i).String() + "\"} 1\n")
	}
	s := promParseAt(t, sb.String(), promT0)
	if got, _ := Derive(nil, s, DetectDialect(s)); len(got.Gauges) != maxGauges {
		t.Errorf("%d gauges, want %d", len(got.Gauges), maxGauges)
	}
}

// TestPerTokenMeansAreNeverStages: llama.cpp's means are per token and keyed
// so; every other stage key is a per-request one. (That the attributor takes
// no stage from a per-token key is attribute's TestPerTokenMeansGiveNoEstimate.)
func TestPerTokenMeansAreNeverStages(t *testing.T) {
	t.Parallel()
	perRequest := map[string]bool{"queue": true, "prefill": true, "decode": true, "ttft": true, "itl": true,
		"e2e": true, "inference": true, "tokenize": true, "tpot": true}
	for _, name := range promdialect.Names() {
		d, err := promdialect.ByName(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, src := range d.Stages {
			perToken := src.Count.Name == "llamacpp:prompt_tokens_total" || src.Count.Name == "llamacpp:tokens_predicted_total"
			if perToken != strings.HasSuffix(src.Stage, event.PerTokenSuffix) || !perToken && !perRequest[src.Stage] {
				t.Errorf("%s: stage key %q (count %q)", name, src.Stage, src.Count.Name)
			}
		}
	}
	llamacpp, err := promdialect.ByName(promdialect.LlamaCpp)
	if err != nil {
		t.Fatal(err)
	}
	sample, _ := Derive(promLoad(t, "llamacpp_a.prom", promT0), promLoad(t, "llamacpp_b.prom", promT0.Add(2*time.Second)), llamacpp)
	if len(sample.Stages) == 0 {
		t.Errorf("llama.cpp sample has no stages, want its per-token means")
	}
	for key := range sample.Stages {
		if !strings.HasSuffix(key, event.PerTokenSuffix) {
			t.Errorf("llama.cpp sample stage %q: want only per-token keys", key)
		}
	}
}
