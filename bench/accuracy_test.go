package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// fakeSim is a stand-in for the simulator: it paces frames with a short
// sleep and records each frame's flush time, as the simulator's OnFrame does.
func fakeSim(gap time.Duration) SimStarter {
	return func(ctx context.Context, truth *GroundTruth) (string, func() error, error) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				MaxTokens int `json:"max_tokens"`
			}
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			id := r.Header.Get("X-Request-Id")
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n")
			w.(http.Flusher).Flush()
			for i := range req.MaxTokens {
				time.Sleep(gap)
				fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\" t%d\"}}]}\n\n", i)
				w.(http.Flusher).Flush()
				truth.Record(id, i, time.Now())
			}
			fmt.Fprint(w, "data: [DONE]\n\n")
		}))
		return srv.URL, func() error { srv.Close(); return nil }, nil
	}
}

// twoBareClients stands in for the probe with a second bare client, so the
// harness is tested without depending on the probe.
func twoBareClients() []ClientFactory {
	probe := BareFactory("m")
	probe.Name = "probe"
	return []ClientFactory{probe, BareFactory("m")}
}

func TestRunAccuracyAgainstStandIn(t *testing.T) {
	t.Parallel()
	cfg := AccuracyConfig{
		Profile: "stand-in", Concurrency: []int{1, 4}, Requests: 4, PromptTokens: 8, OutputTokens: 5,
		Timeout: 30 * time.Second, Clients: twoBareClients(), StartServer: fakeSim(time.Millisecond),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	res, err := RunAccuracy(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Levels) != 2 {
		t.Fatalf("levels = %d, want 2", len(res.Levels))
	}
	for _, lv := range res.Levels {
		if lv.Ratio == nil {
			t.Fatalf("conc %d: no ratio", lv.Concurrency)
		}
		for _, c := range lv.Clients {
			if c.Requests != 4 || c.Failed != 0 || c.Mismatched != 0 {
				t.Errorf("conc %d %s: %+v, want 4 requests, none failed or mismatched", lv.Concurrency, c.Client, c)
			}
			if c.TTFT.N != 4 || c.ITL.N != 4*4 {
				t.Errorf("conc %d %s: TTFT n %d ITL n %d, want 4 and 16", lv.Concurrency, c.Client, c.TTFT.N, c.ITL.N)
			}
			// Errors are small but never zero-width nonsense: mean ≤ p99 ≤ max, all ≥ 0.
			for _, s := range []ErrorStats{c.TTFT, c.ITL} {
				if s.MeanUs < 0 || s.MeanUs > s.MaxUs || s.P99Us > s.MaxUs {
					t.Errorf("conc %d %s: inconsistent stats %+v", lv.Concurrency, c.Client, s)
				}
			}
		}
	}
	if !strings.Contains(res.Target.Text, "concurrency 64") || !strings.Contains(res.Target.Text, "checked at 4") {
		t.Errorf("target text = %q", res.Target.Text)
	}

	var table bytes.Buffer
	if err := WriteAccuracyTable(&table, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"TTFT mean", "probe/bare", "target: probe within 1.2x of bare client on mean and p99 |error| at concurrency 64"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, res); err != nil {
		t.Fatal(err)
	}
	var back AccuracyResult
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("json does not read back: %v\n%s", err, js.String())
	}
}

func TestRunAccuracyCountsFailures(t *testing.T) {
	t.Parallel()
	broken := func(ctx context.Context, truth *GroundTruth) (string, func() error, error) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
		}))
		return srv.URL, func() error { srv.Close(); return nil }, nil
	}
	cfg := AccuracyConfig{Concurrency: []int{2}, Requests: 2, PromptTokens: 1, OutputTokens: 2,
		Timeout: 10 * time.Second, Clients: twoBareClients(), StartServer: broken}
	_, err := RunAccuracy(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "warm-up") {
		t.Fatalf("err = %v, want a warm-up failure", err)
	}
}

func TestCheckAccuracyTarget(t *testing.T) {
	t.Parallel()
	ok := &AccuracyRatio{TTFTMean: 1.1, TTFTP99: 1.2, ITLMean: 0.9, ITLP99: 1}
	bad := &AccuracyRatio{TTFTMean: 1.1, TTFTP99: 1.5, ITLMean: 0.9, ITLP99: 1}
	got := checkAccuracyTarget([]AccuracyLevel{{Concurrency: 1, Ratio: bad}, {Concurrency: 64, Ratio: ok}, {Concurrency: 128, Ratio: bad}})
	if !got.Met || strings.Contains(got.Text, "checked at") {
		t.Errorf("checked the wrong level: %+v", got)
	}
	got = checkAccuracyTarget([]AccuracyLevel{{Concurrency: 1, Ratio: ok}, {Concurrency: 8, Ratio: bad}})
	if got.Met || len(got.Missed) != 1 || !strings.Contains(got.Missed[0], "TTFT p99 1.50x") {
		t.Errorf("want TTFT p99 missed at 8: %+v", got)
	}
	if got := checkAccuracyTarget(nil); got.Met {
		t.Error("nothing measured counts as met")
	}
}

func TestAccuracyConfigValidate(t *testing.T) {
	t.Parallel()
	good := AccuracyConfig{Concurrency: []int{1}, PromptTokens: 1, OutputTokens: 2, Timeout: time.Second,
		Clients: twoBareClients(), StartServer: fakeSim(0)}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		edit func(*AccuracyConfig)
		want string
	}{
		{"no levels", func(c *AccuracyConfig) { c.Concurrency = nil }, "at least one level"},
		{"zero concurrency", func(c *AccuracyConfig) { c.Concurrency = []int{0} }, "between 1 and 4096"},
		{"one output token", func(c *AccuracyConfig) { c.OutputTokens = 1 }, "output tokens"},
		{"negative requests", func(c *AccuracyConfig) { c.Requests = -1 }, "requests"},
		{"no timeout", func(c *AccuracyConfig) { c.Timeout = 0 }, "timeout"},
	}
	for _, tt := range tests {
		c := good
		tt.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestBuildPrompt(t *testing.T) {
	t.Parallel()
	if got := len(strings.Fields(BuildPrompt(37))); got != 37 {
		t.Errorf("words = %d, want 37", got)
	}
	if BuildPrompt(0) != "" {
		t.Error("BuildPrompt(0) not empty")
	}
}
