package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// TestCalibratedCosts checks the h100-7b profile's nominal costs against its
// calibration (a 7B model on one H100 at concurrency 1).
func TestCalibratedCosts(t *testing.T) {
	t.Parallel()
	p, err := ProfileByName("h100-7b")
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(chatBody(promptOf(512), 4, true))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		stage    string
		cost     time.Duration
		from, to time.Duration
	}{
		{"http (512-token request)", p.httpCost(len(body)), 300 * time.Microsecond, time.Millisecond},
		{"tokenize 512", p.tokenizeCost(512), time.Millisecond, 3 * time.Millisecond},
		{"tokenize 8K", p.tokenizeCost(8192), 5 * time.Millisecond, 8 * time.Millisecond},
		{"prefill 512", p.stepCost(512, 0), 15 * time.Millisecond, 25 * time.Millisecond},
		{"first decode", p.stepCost(0, 1), 8 * time.Millisecond, 12 * time.Millisecond},
		{"detokenize", p.DetokenizePerToken, 100 * time.Microsecond, 300 * time.Microsecond},
		{"framing", p.FramingPerFrame, 100 * time.Microsecond, 200 * time.Microsecond},
	} {
		if tc.cost < tc.from || tc.cost > tc.to {
			t.Errorf("%s costs %v, want %v-%v", tc.stage, tc.cost, tc.from, tc.to)
		}
	}
}

// TestStagesPayTheirCosts checks the live server's truth against the
// profile: every stage took at least its nominal cost (the server really
// paused there), and the stages add up to no more than the client itself
// waited for the first frame. On a loaded machine the stages grow, as they
// should: the truth is what happened, the profile is the floor.
func TestStagesPayTheirCosts(t *testing.T) {
	t.Parallel()
	s, url := startServer(t, Config{})
	p := s.Profile()
	ctx := testCtx(t, 20*time.Second)
	body := chatBody(promptOf(512), 4, true)
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	floors := map[string]time.Duration{
		"http":         p.httpCost(len(raw)),
		"tokenize":     p.tokenizeCost(512),
		"prefill":      p.stepCost(512, 0),
		"first_decode": p.stepCost(0, 1),
		"detokenize":   p.DetokenizePerToken,
	}
	stages := map[string][]int64{}
	for i := 0; i < 3; i++ {
		sent := time.Now()
		res := post(ctx, url, "/v1/chat/completions", body, map[string]string{TruthHeader: "1"})
		if !res.done {
			t.Fatalf("request %d: %d %v %s", i, res.status, res.err, res.body)
		}
		waited := contentEvents(t, res)[0].at.Sub(sent)
		tr := lastTruth(t, res)
		if tr.PromptTokens != 512 {
			t.Fatalf("prompt tokens = %d, want 512", tr.PromptTokens)
		}
		for _, st := range tr.Stages() {
			stages[st.Name] = append(stages[st.Name], st.Us)
			// Stages are truncated to whole microseconds since arrival, twice at most.
			if floor, ok := floors[st.Name]; ok && st.Us < floor.Microseconds()-2 {
				t.Errorf("request %d: %s took %d us, less than its cost %v", i, st.Name, st.Us, floor)
			}
		}
		// Up to the first frame's write the stages happen before the client
		// can have it. (The flush is stamped once the write returns, which a
		// busy machine may delay past the client's read.)
		if got := time.Duration(tr.ArrivalToFirstFrameUs-tr.FramingUs) * time.Microsecond; got > waited {
			t.Errorf("request %d: the stages before the first frame's write add up to %v, more than the client waited (%v)", i, got, waited)
		}
	}
	if testing.Verbose() {
		for _, st := range (Truth{}).Stages() {
			fmt.Printf("%-13s %v us\n", st.Name, stages[st.Name])
		}
	}
}

func TestTokenizeCostsTheProfile(t *testing.T) {
	t.Parallel()
	s, url := startServer(t, Config{})
	res := post(testCtx(t, 10*time.Second), url, "/v1/chat/completions", chatBody(promptOf(8192), 1, true), map[string]string{TruthHeader: "1"})
	if !res.done {
		t.Fatalf("8K request: %d %v", res.status, res.err)
	}
	tr := lastTruth(t, res)
	if floor := s.Profile().tokenizeCost(8192); tr.TokenizeUs < floor.Microseconds()-1 {
		t.Errorf("tokenizing 8K tokens took %d us, less than its cost %v", tr.TokenizeUs, floor)
	}
	if !bytes.Contains(res.events[len(res.events)-1].data, []byte(`"prompt_tokens":8192`)) {
		t.Errorf("usage: %s", res.events[len(res.events)-1].data)
	}
}
