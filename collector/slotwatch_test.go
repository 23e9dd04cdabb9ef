package collector

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// gaugePage serves a vLLM-like metrics page whose running gauge the test
// sets.
func gaugePage(t *testing.T, running *atomic.Int64) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} %d\n", running.Load())
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics"
}

func TestSlotWatchSeesTheReleaseAfterTheClose(t *testing.T) {
	var running atomic.Int64
	running.Store(2) // one live request of the probe, one abandoned still held
	prom, err := NewProm(PromConfig{URL: gaugePage(t, &running)})
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewSlotWatch(SlotWatchConfig{Prom: prom, Live: func() int { return 1 }, Every: time.Millisecond, Hold: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	defer func() { cancel(); <-done }()

	closed := time.Now()
	type result struct {
		after        time.Duration
		source, note string
	}
	got := make(chan result, 1)
	go func() {
		a, s, n := w.Watch(ctx, closed)
		got <- result{a, s, n}
	}()
	// However long the host takes, the release cannot be seen before the
	// gauge drops, and it is seen after.
	time.Sleep(20 * time.Millisecond)
	select {
	case r := <-got:
		t.Fatalf("released while the gauge still held it: %+v", r)
	default:
	}
	dropped := time.Now()
	running.Store(1)
	r := <-got
	if r.note != "" || r.source != "metrics:vllm:num_requests_running" || r.after < dropped.Sub(closed) {
		t.Fatalf("%+v, want a release at least %s after the close", r, dropped.Sub(closed))
	}
}

func TestSlotWatchWithoutAGauge(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "# TYPE other gauge\nother 1\n")
	}))
	defer srv.Close()
	prom, err := NewProm(PromConfig{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := NewSlotWatch(SlotWatchConfig{Prom: prom, Live: func() int { return 0 }, Every: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	after, _, note := w.Watch(ctx, time.Now())
	if after != 0 || !strings.Contains(note, "no running-requests gauge") {
		t.Fatalf("after %s, note %q", after, note)
	}
	if _, err := NewSlotWatch(SlotWatchConfig{}); err == nil {
		t.Error("a watch without a scraper accepted")
	}
}
