package sim

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestStreamChatExactTokens(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var frames []FrameInfo
	var finished []Truth
	_, url := startServer(t, Config{
		Profile:  tinyProfile(t),
		OnFrame:  func(f FrameInfo) { mu.Lock(); frames = append(frames, f); mu.Unlock() },
		OnFinish: func(tr Truth) { mu.Lock(); finished = append(finished, tr); mu.Unlock() },
	})
	res := post(testCtx(t, 10*time.Second), url, "/v1/chat/completions", chatBody("hello there", 16, true),
		map[string]string{RequestIDHeader: "req-1", TruthHeader: "1"})
	if res.err != nil || res.status != http.StatusOK || !res.done {
		t.Fatalf("status %d, err %v, done %v", res.status, res.err, res.done)
	}
	if got := res.header.Get(RequestIDHeader); got != "req-1" {
		t.Errorf("X-Request-Id echo = %q, want req-1", got)
	}
	first := parseChunk(t, res.events[0].data)
	if r := first.Choices[0].Delta.Role; r == nil || *r != "assistant" {
		t.Errorf("first chunk is not role-only: %s", res.events[0].data)
	}
	if got := len(contentEvents(t, res)); got != 16 {
		t.Errorf("content chunks = %d, want 16", got)
	}
	for _, e := range res.events {
		c := parseChunk(t, e.data)
		if c.ID != "chatcmpl-req-1" || c.Object != "chat.completion.chunk" || c.Model != DefaultModel {
			t.Fatalf("chunk id/object/model = %q/%q/%q", c.ID, c.Object, c.Model)
		}
	}
	fin := parseChunk(t, res.events[len(res.events)-2].data)
	if fr := fin.Choices[0].FinishReason; fr == nil || *fr != "length" {
		t.Errorf("finish chunk: %s", res.events[len(res.events)-2].data)
	}
	last := parseChunk(t, res.events[len(res.events)-1].data)
	if len(last.Choices) != 0 || last.Usage == nil || last.Usage.CompletionTokens != 16 || last.Usage.PromptTokens != countChat([]message{{"user", "hello there"}}, true) {
		t.Errorf("usage chunk: %s", res.events[len(res.events)-1].data)
	}
	tr := lastTruth(t, res)
	if tr.RequestID != "req-1" || tr.OutputTokens != 16 || len(tr.DecodeGapsUs) != 15 {
		t.Errorf("truth = %+v", tr)
	}
	var sum int64
	for _, s := range tr.Stages() {
		if s.Us < 0 {
			t.Errorf("stage %s = %d us", s.Name, s.Us)
		}
		sum += s.Us
	}
	if sum != tr.ArrivalToFirstFrameUs || sum == 0 {
		t.Errorf("stages sum to %d us, arrival_to_first_frame_us = %d", sum, tr.ArrivalToFirstFrameUs)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(frames) != 16 || frames[0].RequestID != "req-1" || frames[15].Index != 15 {
		t.Errorf("OnFrame saw %d frames: %+v", len(frames), frames)
	}
	if len(finished) != 1 || finished[0].ArrivalToFirstFrameUs != tr.ArrivalToFirstFrameUs {
		t.Errorf("OnFinish saw %+v", finished)
	}
}

func TestStreamCompletions(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{Profile: tinyProfile(t)})
	body := map[string]any{"prompt": "once upon a time", "max_tokens": 16, "ignore_eos": true, "stream": true}
	res := post(testCtx(t, 10*time.Second), url, "/v1/completions", body, map[string]string{RequestIDHeader: "c1", TruthHeader: "1"})
	if res.err != nil || !res.done {
		t.Fatalf("status %d err %v", res.status, res.err)
	}
	if got := len(contentEvents(t, res)); got != 16 {
		t.Errorf("content chunks = %d, want 16", got)
	}
	c := parseChunk(t, res.events[0].data)
	if c.ID != "cmpl-c1" || c.Object != "text_completion" {
		t.Errorf("first chunk: %s", res.events[0].data)
	}
	// Without include_usage the truth rides on the finish chunk.
	last := parseChunk(t, res.events[len(res.events)-1].data)
	if last.Choices[0].FinishReason == nil || last.Truth == nil || last.Truth.PromptTokens != 4 {
		t.Errorf("finish chunk: %s", res.events[len(res.events)-1].data)
	}
}

func TestNonStreaming(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{Profile: tinyProfile(t)})
	ctx := testCtx(t, 10*time.Second)
	for _, tc := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/chat/completions", chatBody("hi", 7, false)},
		{"/v1/completions", map[string]any{"prompt": "hi", "max_tokens": 7, "ignore_eos": true}},
	} {
		res := post(ctx, url, tc.path, tc.body, map[string]string{TruthHeader: "1"})
		if res.status != http.StatusOK {
			t.Fatalf("%s: status %d: %s", tc.path, res.status, res.body)
		}
		var got struct {
			Object  string `json:"object"`
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
				Text         string `json:"text"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage usage  `json:"usage"`
			Truth *Truth `json:"latscope_truth"`
		}
		if err := json.Unmarshal(res.body, &got); err != nil {
			t.Fatalf("%s: %v: %s", tc.path, err, res.body)
		}
		text := got.Choices[0].Message.Content + got.Choices[0].Text
		if n := len(strings.Fields(text)); n != 7 || got.Usage.CompletionTokens != 7 || got.Choices[0].FinishReason != "length" {
			t.Errorf("%s: %d words, usage %+v, finish %q", tc.path, n, got.Usage, got.Choices[0].FinishReason)
		}
		if got.Truth == nil || got.Truth.Stream || got.Truth.ArrivalToFirstFrameUs == 0 {
			t.Errorf("%s: truth %+v", tc.path, got.Truth)
		}
	}
}

func TestTokenizeCountsLikeUsage(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{Profile: tinyProfile(t)})
	ctx := testCtx(t, 10*time.Second)
	long := strings.Repeat("x", 20) // 3 tokens
	msgs := []map[string]any{{"role": "system", "content": "be brief"}, {"role": "user", "content": "tell me " + long}}
	tok := post(ctx, url, "/tokenize", map[string]any{"model": DefaultModel, "messages": msgs}, nil)
	var got struct {
		Count       int   `json:"count"`
		MaxModelLen int   `json:"max_model_len"`
		Tokens      []int `json:"tokens"`
	}
	if err := json.Unmarshal(tok.body, &got); err != nil || tok.status != http.StatusOK {
		t.Fatalf("tokenize: %d %s %v", tok.status, tok.body, err)
	}
	if got.Count != len(got.Tokens) || got.MaxModelLen != 32768 {
		t.Errorf("tokenize = %+v", got)
	}
	body := chatBody("", 2, true)
	body["messages"] = msgs
	res := post(ctx, url, "/v1/chat/completions", body, nil)
	u := parseChunk(t, res.events[len(res.events)-1].data).Usage
	if u == nil || u.PromptTokens != got.Count {
		t.Errorf("usage prompt tokens = %+v, /tokenize count = %d", u, got.Count)
	}
	if want := 2*templateTokensPerMsg + generationPromptToks + 2 + 2 + 3; got.Count != want {
		t.Errorf("count = %d, want %d", got.Count, want)
	}
	tok = post(ctx, url, "/tokenize", map[string]any{"prompt": "a b " + long}, nil)
	if err := json.Unmarshal(tok.body, &got); err != nil || got.Count != 5 {
		t.Errorf("tokenize prompt: %s", tok.body)
	}
}

func TestEOSStopsEarlyButNotBeforeMinTokens(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{Profile: tinyProfile(t), Seed: 7})
	ctx := testCtx(t, 20*time.Second)
	stops := 0
	for i := 0; i < 12; i++ {
		body := map[string]any{"prompt": "go", "max_tokens": 20, "min_tokens": 5}
		res := post(ctx, url, "/v1/completions", body, nil)
		var got struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage usage `json:"usage"`
		}
		if err := json.Unmarshal(res.body, &got); err != nil {
			t.Fatalf("%v: %s", err, res.body)
		}
		n, reason := got.Usage.CompletionTokens, got.Choices[0].FinishReason
		if n < 5 || n > 20 || (reason == "length") != (n == 20) {
			t.Errorf("request %d: %d tokens, finish %q", i, n, reason)
		}
		if reason == "stop" {
			stops++
		}
	}
	if stops == 0 || stops == 12 {
		t.Errorf("%d of 12 requests stopped early; want some but not all", stops)
	}
}

func TestMetricsExposition(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{Profile: tinyProfile(t), Model: "m1"})
	ctx := testCtx(t, 10*time.Second)
	body := chatBody("hi", 4, true)
	body["model"] = "m1"
	if res := post(ctx, url, "/v1/chat/completions", body, nil); !res.done {
		t.Fatalf("request failed: %d %v %s", res.status, res.err, res.body)
	}
	fams := scrape(t, url)
	want := map[string]string{
		"vllm:num_requests_waiting": "GAUGE", "vllm:num_requests_running": "GAUGE", "vllm:kv_cache_usage_perc": "GAUGE",
		"vllm:time_to_first_token_seconds": "HISTOGRAM", "vllm:inter_token_latency_seconds": "HISTOGRAM",
		"vllm:request_time_per_output_token_seconds": "HISTOGRAM", "vllm:e2e_request_latency_seconds": "HISTOGRAM",
		"vllm:request_queue_time_seconds": "HISTOGRAM", "vllm:request_prefill_time_seconds": "HISTOGRAM",
		"vllm:request_decode_time_seconds": "HISTOGRAM", "vllm:request_inference_time_seconds": "HISTOGRAM",
		"vllm:prompt_tokens_total": "COUNTER", "vllm:generation_tokens_total": "COUNTER", "vllm:request_success_total": "COUNTER",
	}
	for name, typ := range want {
		f, ok := fams[name]
		if !ok {
			t.Errorf("missing %s", name)
			continue
		}
		if f.GetType().String() != typ {
			t.Errorf("%s is %s, want %s", name, f.GetType(), typ)
		}
		labels := map[string]string{}
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["model_name"] != "m1" || labels["engine"] != "0" {
			t.Errorf("%s labels = %v", name, labels)
		}
	}
	if got := fams["vllm:generation_tokens_total"].GetMetric()[0].GetCounter().GetValue(); got != 4 {
		t.Errorf("generation tokens = %v, want 4", got)
	}
	ttft := fams["vllm:time_to_first_token_seconds"].GetMetric()[0].GetHistogram()
	if ttft.GetSampleCount() != 1 || len(ttft.GetBucket()) != len(ttftBuckets())+1 { // the parser adds +Inf
		t.Errorf("ttft histogram: count %d, %d buckets", ttft.GetSampleCount(), len(ttft.GetBucket()))
	}
	var reason string
	for _, l := range fams["vllm:request_success_total"].GetMetric()[0].GetLabel() {
		if l.GetName() == "finished_reason" {
			reason = l.GetValue()
		}
	}
	if reason != "length" {
		t.Errorf("finished_reason = %q", reason)
	}
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse metrics: %v", err)
	}
	return fams
}

func TestModelsAndHealth(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{Profile: tinyProfile(t)})
	resp, err := http.Get(url + "/health")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("health: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || len(got.Data) != 1 || got.Data[0].ID != DefaultModel {
		t.Errorf("models = %+v, %v", got, err)
	}
}
