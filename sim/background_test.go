package sim

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The background traffic reaches the engine, the metrics and the truth,
// and not OnFinish; closing the server ends it.
func TestBackgroundTraffic(t *testing.T) {
	t.Parallel()
	var finished atomic.Int64
	srv, err := New(Config{
		Background: Background{Rate: 50, PromptTokens: 32, OutputTokens: 8},
		OnFinish:   func(Truth) { finished.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if got, ok := srv.WaitBackground(ctx, func(bt BackgroundTruth) bool { return bt.Background.Requests >= 40 }); !ok {
		t.Fatalf("40 background requests did not finish within a minute: %+v", got)
	}
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, BackgroundTruthPath, nil))
	var truth BackgroundTruth
	if err := json.Unmarshal(rec.Body.Bytes(), &truth); err != nil {
		t.Fatalf("truth %q: %v", rec.Body.String(), err)
	}
	b := truth.Background
	if b.Requests < 40 || b.Requests > truth.Sent {
		t.Errorf("sent %d, finished %d: want 40 or more finished, no more than sent", truth.Sent, b.Requests)
	}
	if truth.All != b {
		t.Errorf("all %+v differs from background %+v with no other client", truth.All, b)
	}
	if b.OutputTokens < b.Requests*4 || b.OutputTokens > b.Requests*12 {
		t.Errorf("%d output tokens over %d requests: want 4 to 12 each", b.OutputTokens, b.Requests)
	}
	if !(b.PrefillSeconds > 0 && b.DecodeSeconds > 0 && b.E2ESeconds >= b.QueueSeconds+b.PrefillSeconds+b.DecodeSeconds) {
		t.Errorf("phases do not add up: %+v", b)
	}
	rec = httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "vllm:request_queue_time_seconds_count") ||
		!strings.Contains(rec.Body.String(), "vllm:num_preemptions_total") {
		t.Error("metrics lack the queue histogram or the preemption counter")
	}
	if n := finished.Load(); n != 0 {
		t.Errorf("OnFinish called %d times for background requests", n)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestBackgroundValidate(t *testing.T) {
	t.Parallel()
	for _, b := range []Background{{Rate: -1}, {Rate: 1, PromptTokens: -1}, {Rate: 1, OutputTokens: 1 << 21}} {
		if _, err := New(Config{Background: b}); err == nil {
			t.Errorf("%+v accepted", b)
		}
	}
}

func TestSpread(t *testing.T) {
	t.Parallel()
	srv := &Server{}
	rng := srv.requestRand(1)
	for range 1000 {
		if v := spread(rng, 100); v < 50 || v > 150 {
			t.Fatalf("spread(100) = %d", v)
		}
		if v := spread(rng, 1); v != 1 {
			t.Fatalf("spread(1) = %d", v)
		}
	}
}
