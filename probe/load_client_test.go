package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// loadSSEServer is a loopback OpenAI-style chat server that streams max_tokens
// one-token chunks every itl, then usage counting two tokens per prompt
// word, then [DONE]. It remembers the ids it was sent.
type loadSSEServer struct {
	*httptest.Server
	itl time.Duration

	mu          sync.Mutex
	requestIDs  map[string]bool
	traceparent map[string]string // request id → traceparent
	streaming   map[string]bool   // request ids that have had a token
	// onStreaming, when set, is called with the number of requests that
	// have had a token, each time one more has.
	onStreaming func(n int)
}

func newLoadSSEServer(t *testing.T, itl time.Duration) *loadSSEServer {
	t.Helper()
	s := &loadSSEServer{itl: itl, requestIDs: map[string]bool{}, traceparent: map[string]string{}, streaming: map[string]bool{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *loadSSEServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var body struct {
		MaxTokens int `json:"max_tokens"`
		Messages  []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Messages) == 0 {
		http.Error(w, `{"error":{"message":"bad body"}}`, http.StatusBadRequest)
		return
	}
	id := r.Header.Get("X-Request-Id")
	s.mu.Lock()
	s.requestIDs[id] = true
	s.traceparent[id] = r.Header.Get("Traceparent")
	s.mu.Unlock()

	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
	}
	send(map[string]any{"id": id, "choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""}}}})
	tick := time.NewTicker(s.itl)
	defer tick.Stop()
	for i := range body.MaxTokens {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
		send(map[string]any{"id": id, "choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": fmt.Sprintf("t%d ", i)}}}})
		if i == 0 {
			s.started(id)
		}
	}
	promptTokens := 2 * len(strings.Fields(body.Messages[0].Content))
	send(map[string]any{"id": id, "choices": []any{}, "usage": map[string]any{
		"prompt_tokens": promptTokens, "completion_tokens": body.MaxTokens, "total_tokens": promptTokens + body.MaxTokens}})
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

// started notes that request id has had its first token.
func (s *loadSSEServer) started(id string) {
	s.mu.Lock()
	s.streaming[id] = true
	n, hook := len(s.streaming), s.onStreaming
	s.mu.Unlock()
	if hook != nil {
		hook(n)
	}
}

func newLoadTestClient(t *testing.T, url string) *Client {
	t.Helper()
	c, err := NewClient(ClientConfig{BaseURL: url, Dialect: DialectOpenAIChat, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRunnerWithClientClosedLoop(t *testing.T) {
	before := runtime.NumGoroutine()
	srv := newLoadSSEServer(t, 2*time.Millisecond)
	client := newLoadTestClient(t, srv.URL)
	ps, err := NewPromptSource(t.Context(), PromptConfig{PromptTokens: Length{Mean: 100}, OutputTokens: Length{Mean: 8}, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRunner(client, LoadConfig{Concurrency: 3, Requests: 16, Warmup: 2}, ps)
	if err != nil {
		t.Fatal(err)
	}
	c := &runCollector{t: t}
	st := runLoadBounded(t, t.Context(), r, c)
	checkLoadAccounting(t, st, c)
	if st.Sent != 16 || st.OK != 16 || st.WarmupSent != 2 {
		t.Fatalf("stats %+v, want 16 ok and 2 warmup", st)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for _, rec := range c.reqs {
		if rec.Dialect != DialectOpenAIChat || len(rec.Chunks) != 8 || rec.OutputTokens != 8 {
			t.Fatalf("record %s: dialect %s, %d chunks, %d tokens", rec.ID, rec.Dialect, len(rec.Chunks), rec.OutputTokens)
		}
		if !srv.requestIDs[rec.ID] {
			t.Fatalf("server never saw request id %s", rec.ID)
		}
		if tp := srv.traceparent[rec.ID]; !strings.Contains(tp, rec.TraceID) {
			t.Fatalf("traceparent %q does not carry trace id %s", tp, rec.TraceID)
		}
	}
	// The server counts two tokens per word; its usage corrected the prompts.
	if cal := ps.Calibration(); cal.Source != "assumed+usage" || cal.UsageScale < 1.8 || cal.UsageScale > 2.2 {
		t.Fatalf("calibration %+v, want learnt from usage with scale about 2", cal)
	}
	p, target, _ := ps.Next(1000)
	if got := 2 * len(strings.Fields(p)); got < target*95/100 || got > target*105/100 {
		t.Fatalf("after usage correction the server would count %d tokens for a target of %d", got, target)
	}
	client.CloseIdleConnections()
	srv.Close()
	checkNoLoadLeak(t, before)
}

func TestRunnerWithClientOpenLoopAndCancel(t *testing.T) {
	before := runtime.NumGoroutine()
	srv := newLoadSSEServer(t, 10*time.Millisecond)
	client := newLoadTestClient(t, srv.URL)
	ps, err := NewPromptSource(t.Context(), PromptConfig{PromptTokens: Length{Mean: 64}, OutputTokens: Length{Mean: 20, StdDev: 5}, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	// 40 req/s for 30 requests; each stream takes about 200 ms, so several
	// overlap. Bounded by count, not time, so a starved machine only makes
	// it slower.
	r, err := NewRunner(client, LoadConfig{Rate: 40, Arrival: ArrivalPoisson, Requests: 30, Seed: 5}, ps)
	if err != nil {
		t.Fatal(err)
	}
	c := &runCollector{t: t}
	st := runLoadBounded(t, t.Context(), r, c)
	checkLoadAccounting(t, st, c)
	if st.Sent != 30 || st.OK != 30 || st.InFlightPeak < 2 {
		t.Fatalf("stats %+v, want 30 requests, all ok, overlapping", st)
	}
	var first time.Time
	for _, rec := range c.reqs {
		if rec.Seq == 0 {
			first = rec.Intended
		}
	}
	pacer, _ := NewPacer(ArrivalPoisson, 40, 1, 5)
	for _, rec := range c.reqs {
		if rec.Intended.IsZero() || rec.SchedLag < 0 || rec.Start.Before(rec.Intended) {
			t.Fatalf("record %s: intended %s start %s lag %s", rec.ID, rec.Intended, rec.Start, rec.SchedLag)
		}
		// Intended times are the seeded Poisson schedule.
		due, _ := pacer.Pace(0, rec.Seq)
		if diff := rec.Intended.Sub(first) - due; diff < -time.Microsecond || diff > time.Microsecond {
			t.Fatalf("seq %d intended at +%s, schedule says +%s", rec.Seq, rec.Intended.Sub(first), due)
		}
	}

	// Ctrl-C in the middle of long streams: every one is recorded cancelled.
	slow := newLoadSSEServer(t, 200*time.Millisecond)
	slowClient := newLoadTestClient(t, slow.URL)
	ps2, _ := NewPromptSource(t.Context(), PromptConfig{PromptTokens: Length{Mean: 32}, OutputTokens: Length{Mean: 500}, Seed: 6})
	r2, err := NewRunner(slowClient, LoadConfig{Concurrency: 4}, ps2)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	slow.mu.Lock()
	slow.onStreaming = func(n int) {
		if n == 4 {
			cancel() // Ctrl-C once all four streams are under way
		}
	}
	slow.mu.Unlock()
	c2 := &runCollector{t: t}
	st2 := runLoadBounded(t, ctx, r2, c2)
	checkLoadAccounting(t, st2, c2)
	if !st2.Interrupted || st2.Sent != 4 || st2.ByOutcome[event.OutcomeCancelled] != 4 || st2.RunEnded != 4 || st2.Errors != 0 {
		t.Fatalf("stats %+v, want 4 requests, all cancelled, none an error", st2)
	}
	client.CloseIdleConnections()
	slowClient.CloseIdleConnections()
	srv.Close()
	slow.Close()
	checkNoLoadLeak(t, before)
}
