package sim

import (
	"fmt"
	"sort"
	"testing"
	"time"
)

// TestCalibratedStages checks the h100-7b profile at concurrency 1 against
// its calibration, on the median of a few requests (one slow outlier on a
// busy machine must not fail the test).
func TestCalibratedStages(t *testing.T) {
	// Not parallel: timing-sensitive, so it runs alone.
	_, url := startServer(t, Config{})
	ctx := testCtx(t, 20*time.Second)
	const runs = 5
	stages := map[string][]int64{}
	for i := 0; i < runs; i++ {
		res := post(ctx, url, "/v1/chat/completions", chatBody(promptOf(512), 4, true), map[string]string{TruthHeader: "1"})
		if !res.done {
			t.Fatalf("request %d: %d %v %s", i, res.status, res.err, res.body)
		}
		tr := lastTruth(t, res)
		if tr.PromptTokens != 512 {
			t.Fatalf("prompt tokens = %d, want 512", tr.PromptTokens)
		}
		for _, s := range tr.Stages() {
			stages[s.Name] = append(stages[s.Name], s.Us)
		}
		stages["framing_mean"] = append(stages["framing_mean"], tr.FramingTotalUs/int64(tr.OutputTokens))
	}
	var tok8ks []int64
	for i := 0; i < 3; i++ {
		res := post(ctx, url, "/v1/chat/completions", chatBody(promptOf(8192), 1, true), map[string]string{TruthHeader: "1"})
		if !res.done {
			t.Fatalf("8K request: %d %v", res.status, res.err)
		}
		tok8ks = append(tok8ks, lastTruth(t, res).TokenizeUs)
	}
	tok8k := median(tok8ks)
	if raceEnabled {
		t.Skip("timing not asserted under the race detector")
	}

	for _, tc := range []struct {
		stage    string
		from, to time.Duration
	}{
		{"http", 300 * time.Microsecond, time.Millisecond},
		{"tokenize", time.Millisecond, 3 * time.Millisecond},
		{"prefill", 15 * time.Millisecond, 25 * time.Millisecond},
		{"first_decode", 8 * time.Millisecond, 12 * time.Millisecond},
		{"detokenize", 100 * time.Microsecond, 300 * time.Microsecond},
		// The profile aims framing at 0.11-0.2 ms, but the truth includes the
		// real write and flush, which alone takes 0.1-0.3 ms on a loaded
		// 2-core test machine; the upper bound allows for that.
		{"framing", 100 * time.Microsecond, 400 * time.Microsecond},
	} {
		got := time.Duration(median(stages[tc.stage])) * time.Microsecond
		if got < tc.from || got > tc.to {
			t.Errorf("%s median = %v, want %v-%v (all: %v us)", tc.stage, got, tc.from, tc.to, stages[tc.stage])
		}
	}
	if got := time.Duration(tok8k) * time.Microsecond; got < 5*time.Millisecond || got > 8*time.Millisecond {
		t.Errorf("tokenize 8K tokens = %v, want 5-8ms", got)
	}
	if testing.Verbose() {
		for _, s := range (Truth{}).Stages() {
			fmt.Printf("%-13s %v us\n", s.Name, stages[s.Name])
		}
		fmt.Printf("tokenize 8K   %d us\nframing mean  %v us\n", tok8k, stages["framing_mean"])
	}
}

func median(xs []int64) int64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]int64(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
