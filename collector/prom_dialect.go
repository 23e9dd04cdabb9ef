package collector

import (
	"strings"

	"github.com/latscope/latscope/promdialect"
)

// DetectDialect names the server from the metric names in s. Servers that
// embed another's metrics are checked first: Triton with a vLLM backend
// exposes vllm: names next to its own, and the vLLM ones are richer.
func DetectDialect(s *Scrape) promdialect.Dialect {
	var name string
	switch {
	case s == nil:
		name = promdialect.Unknown
	case hasFamilyPrefix(s, "trtllm_"):
		name = promdialect.TRTLLM
	case hasFamilyPrefix(s, "lmdeploy:"):
		name = promdialect.LMDeploy
	case hasFamilyPrefix(s, "sglang:"):
		name = promdialect.SGLang
	case hasFamilyPrefix(s, "llamacpp:"):
		name = promdialect.LlamaCpp
	case hasFamilyPrefix(s, "tgi_"):
		name = promdialect.TGI
	case hasFamilyPrefix(s, "vllm:"):
		name = promdialect.VLLMv0
		if isVLLMv1(s) {
			name = promdialect.VLLM
		}
	case hasFamilyPrefix(s, "nv_inference_"), hasFamilyPrefix(s, "nv_trt_llm_"):
		name = promdialect.Triton
	default:
		name = promdialect.Unknown
	}
	d, _ := promdialect.ByName(name)
	return d
}

func hasFamilyPrefix(s *Scrape, prefix string) bool {
	for name := range s.Families {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// isVLLMv1 tells the V1 engine from v0: V1 labels its series with the engine
// index and renamed the KV gauge to kv_cache_usage_perc.
func isVLLMv1(s *Scrape) bool {
	if _, ok := s.Families["vllm:kv_cache_usage_perc"]; ok {
		return true
	}
	for name, f := range s.Families {
		if !strings.HasPrefix(name, "vllm:") {
			continue
		}
		for _, sr := range f.Series {
			if _, ok := sr.Labels["engine"]; ok {
				return true
			}
		}
	}
	return false
}
