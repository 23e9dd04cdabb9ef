package sim

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Profile is the cost model of one simulated deployment. Costs are nominal:
// the server measures what each stage actually took.
type Profile struct {
	Name string

	// Front end.
	HTTPBase           time.Duration // parsing and validating one request
	HTTPPerKiB         time.Duration // extra parsing cost per KiB of body
	TokenizeBase       time.Duration // templating and tokenizer call overhead
	TokenizePerToken   time.Duration
	DetokenizePerToken time.Duration
	FramingPerFrame    time.Duration // building, writing and flushing one SSE event

	// Engine: step time = StepOverhead + prefill tokens × PrefillPerToken
	// + (DecodeBase + (batch−1) × DecodePerSeq when any sequence decodes).
	StepOverhead    time.Duration
	PrefillPerToken time.Duration
	DecodeBase      time.Duration
	DecodePerSeq    time.Duration

	// Capacity.
	MaxNumSeqs       int // batch slots
	MaxBatchedTokens int // per-step token budget (chunked prefill)
	KVCapacityTokens int // tokens the KV cache holds
	MaxModelLen      int // prompt + output limit
}

// stepCost is the nominal duration of one engine step.
func (p Profile) stepCost(prefillTokens, decodeSeqs int) time.Duration {
	d := p.StepOverhead + time.Duration(prefillTokens)*p.PrefillPerToken
	if decodeSeqs > 0 {
		d += p.DecodeBase + time.Duration(decodeSeqs-1)*p.DecodePerSeq
	}
	return d
}

func (p Profile) httpCost(bodyBytes int) time.Duration {
	return p.HTTPBase + time.Duration(bodyBytes)*p.HTTPPerKiB/1024
}

func (p Profile) tokenizeCost(tokens int) time.Duration {
	return p.TokenizeBase + time.Duration(tokens)*p.TokenizePerToken
}

// profiles are the built-in profiles. h100-7b is calibrated at concurrency 1
// to: tokenize 512 tokens ≈1.5 ms (8K ≈6.3 ms), prefill 512 tokens ≈19 ms,
// first decode step ≈9 ms, HTTP parse ≈0.45 ms, detokenize ≈0.15 ms, SSE
// framing ≈0.11-0.2 ms. Front-end costs include the real work done, so a stage
// costs the larger of its nominal cost and what the machine actually took.
// Its per-step token budget is vLLM's default for the OpenAI server on a GPU
// with at least 70 GiB other than an A100 (8192, vllm/engine/arg_utils.py):
// a smaller one makes prompts wait for budget at loads a real H100 serves
// without a queue (a prompt waiting for budget is queued, in vLLM and here).
func profiles() map[string]Profile {
	return map[string]Profile{
		"h100-7b": {
			Name:               "h100-7b",
			HTTPBase:           400 * time.Microsecond,
			HTTPPerKiB:         10 * time.Microsecond,
			TokenizeBase:       1200 * time.Microsecond,
			TokenizePerToken:   620 * time.Nanosecond,
			DetokenizePerToken: 150 * time.Microsecond,
			FramingPerFrame:    110 * time.Microsecond,
			StepOverhead:       1 * time.Millisecond,
			PrefillPerToken:    35 * time.Microsecond,
			DecodeBase:         7800 * time.Microsecond,
			DecodePerSeq:       60 * time.Microsecond,
			MaxNumSeqs:         256,
			MaxBatchedTokens:   8192,
			KVCapacityTokens:   120_000, // ≈60 GB of fp16 KV at 512 KiB per token
			MaxModelLen:        32768,
		},
		"tiny": {
			Name:               "tiny",
			HTTPBase:           40 * time.Microsecond,
			HTTPPerKiB:         1 * time.Microsecond,
			TokenizeBase:       20 * time.Microsecond,
			TokenizePerToken:   10 * time.Nanosecond,
			DetokenizePerToken: 10 * time.Microsecond,
			FramingPerFrame:    10 * time.Microsecond,
			StepOverhead:       200 * time.Microsecond,
			PrefillPerToken:    500 * time.Nanosecond,
			DecodeBase:         1 * time.Millisecond,
			DecodePerSeq:       20 * time.Microsecond,
			MaxNumSeqs:         64,
			MaxBatchedTokens:   2048,
			KVCapacityTokens:   65536,
			MaxModelLen:        32768,
		},
	}
}

// ProfileNames lists the built-in profiles, sorted.
func ProfileNames() []string {
	var names []string
	for n := range profiles() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ProfileByName returns a built-in profile.
func ProfileByName(name string) (Profile, error) {
	p, ok := profiles()[name]
	if !ok {
		return Profile{}, fmt.Errorf("unknown profile %q (have %s)", name, strings.Join(ProfileNames(), ", "))
	}
	return p, nil
}

func (p Profile) validate() error {
	switch {
	case p.MaxNumSeqs < 1:
		return fmt.Errorf("profile %q: max num seqs must be at least 1", p.Name)
	case p.MaxBatchedTokens < 1:
		return fmt.Errorf("profile %q: max batched tokens must be at least 1", p.Name)
	case p.KVCapacityTokens < 1 || p.MaxModelLen < 1:
		return fmt.Errorf("profile %q: kv capacity and max model len must be positive", p.Name)
	}
	for _, d := range []time.Duration{p.HTTPBase, p.HTTPPerKiB, p.TokenizeBase, p.TokenizePerToken,
		p.DetokenizePerToken, p.FramingPerFrame, p.StepOverhead, p.PrefillPerToken, p.DecodeBase, p.DecodePerSeq} {
		if d < 0 {
			return fmt.Errorf("profile %q: negative cost", p.Name)
		}
	}
	return nil
}
