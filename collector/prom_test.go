package collector

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/promdialect"
	"github.com/latscope/latscope/sim"
)

// promWait bounds every wait for an event; generous, as the tests share two
// busy cores with others.
const promWait = 20 * time.Second

// promTestTimeout is the scrape timeout of tests that do not test timeouts:
// far above their short intervals, so a busy machine cannot fail a scrape.
const promTestTimeout = 5 * time.Second

// promRun is a running Prom with the events it has emitted so far.
type promRun struct {
	t      *testing.T
	ch     chan event.Event
	seen   []event.Event
	cancel context.CancelFunc
	done   chan error
}

// startProm runs a Prom for cfg until the test ends (or stop is called).
func startProm(t *testing.T, cfg PromConfig) *promRun {
	t.Helper()
	p, err := NewProm(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &promRun{t: t, ch: make(chan event.Event, 64), cancel: cancel, done: make(chan error, 1)}
	emit := func(e event.Event) {
		if err := e.Validate(); err != nil {
			t.Errorf("invalid event: %v", err)
		}
		select {
		case r.ch <- e:
		case <-ctx.Done():
		}
	}
	go func() { r.done <- p.Run(ctx, emit) }()
	t.Cleanup(func() { r.stop() })
	return r
}

// stop cancels Run and waits for it to return.
func (r *promRun) stop() {
	r.t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			r.t.Errorf("Run returned %v", err)
		}
		r.done <- nil // let a second stop (the cleanup) return at once
	case <-time.After(promWait):
		r.t.Fatal("Run did not return after cancel")
	}
}

// next returns the next event that satisfies pred, recording every event.
func (r *promRun) next(what string, pred func(event.Event) bool) event.Event {
	r.t.Helper()
	deadline := time.After(promWait)
	for {
		select {
		case e := <-r.ch:
			r.seen = append(r.seen, e)
			if pred(e) {
				return e
			}
		case <-deadline:
			r.t.Fatalf("no %s within %v; saw %d events", what, promWait, len(r.seen))
		}
	}
}

func isSample(e event.Event) bool      { return e.Server != nil }
func isFreshSample(e event.Event) bool { return e.Server != nil && !e.Server.Stale }
func isStaleSample(e event.Event) bool { return e.Server != nil && e.Server.Stale }
func isMarker(prefix string) func(event.Event) bool {
	return func(e event.Event) bool {
		return e.Marker != nil && e.Marker.Kind == event.MarkerCollector && strings.HasPrefix(e.Marker.Message, prefix)
	}
}

// promServer serves fixture pages in turn (the last one from then on) and
// records the Accept header.
func promServer(t *testing.T, pages ...string) (*httptest.Server, *atomic.Value) {
	t.Helper()
	var n atomic.Int64
	var accept atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accept.Store(r.Header.Get("Accept"))
		i := int(n.Add(1)) - 1
		if i >= len(pages) {
			i = len(pages) - 1
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write([]byte(pages[i]))
	}))
	t.Cleanup(srv.Close)
	return srv, &accept
}

func TestPromScrapesChangingPage(t *testing.T) {
	t.Parallel()
	srv, accept := promServer(t, promFixture(t, "vllm_v1_a.prom"), promFixture(t, "vllm_v1_b.prom"))
	url := srv.URL + "/metrics"
	r := startProm(t, PromConfig{URL: url, Interval: 30 * time.Millisecond, Timeout: promTestTimeout})

	first := r.next("first sample", isSample).Server
	if first.Stale || first.Dialect != promdialect.VLLM || first.Source != url || first.Stages != nil {
		t.Errorf("first sample = %+v", first)
	}
	promCheckPtr(t, "first waiting", first.Waiting, promF(1))

	second := r.next("second sample", isSample).Server
	if second.Stale || second.Interval <= 0 {
		t.Errorf("second sample: stale %v interval %v", second.Stale, second.Interval)
	}
	promCheckPtr(t, "waiting", second.Waiting, promF(2))
	// The interval's length is the real clock's, so check counts, not rates.
	if second.PromptTokensPerSec == nil || *second.PromptTokensPerSec <= 0 {
		t.Errorf("prompt tokens/s = %v", promShow(second.PromptTokensPerSec))
	}
	promCheckStages(t, map[string]event.HistStat{"ttft": second.Stages["ttft"]}, map[string]event.HistStat{
		"ttft": {Count: 10, Mean: promSec(0.08), P50: promSec(0.06), P90: promSec(0.08), P99: promSec(0.25 + 0.25*0.9)},
	})

	third := r.next("third sample", isSample).Server
	if st, ok := third.Stages["ttft"]; !ok || st.Count != 0 {
		t.Errorf("unchanged page: ttft = %+v %v, want count 0", st, ok)
	}
	if got := accept.Load(); got != "text/plain;version=0.0.4" {
		t.Errorf("Accept = %q", got)
	}
	for _, e := range r.seen {
		if e.Marker != nil {
			t.Errorf("unexpected marker %q", e.Marker.Message)
		}
	}
}

// A failing server: one marker per state change, stale copies of the last
// good values meanwhile, and a marker when it recovers.
func TestPromFailureAndRecovery(t *testing.T) {
	t.Parallel()
	page := promFixture(t, "vllm_v1_b.prom")
	var failing atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(page))
	}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/metrics"
	r := startProm(t, PromConfig{URL: url, Interval: 20 * time.Millisecond, Timeout: promTestTimeout})

	good := r.next("good sample", isFreshSample).Server
	failing.Store(true)
	want := "metrics scrape failed: 404 Not Found from " + url + ": no metrics page"
	m := r.next("failure marker", isMarker("metrics scrape failed")).Marker
	if m.Message != want || m.Source != "collector.prom" {
		t.Errorf("marker = %q from %q, want %q", m.Message, m.Source, want)
	}
	for i := 0; i < 3; i++ {
		s := r.next("stale sample", isStaleSample).Server
		if s.Error != want || s.Dialect != good.Dialect || s.Time.Before(good.Time) {
			t.Errorf("stale sample: error %q dialect %q time %v", s.Error, s.Dialect, s.Time)
		}
		promCheckPtr(t, "stale waiting", s.Waiting, good.Waiting)
		promCheckPtr(t, "stale kv", s.KVCache, good.KVCache)
		if s.Gauges["vllm:num_requests_running"] != good.Gauges["vllm:num_requests_running"] {
			t.Error("stale sample lost the gauges")
		}
	}
	failing.Store(false)
	r.next("recovery marker", isMarker("metrics scrape recovered"))
	if s := r.next("fresh sample", isSample).Server; s.Stale || s.Error != "" {
		t.Errorf("after recovery: stale %v error %q", s.Stale, s.Error)
	}
	failures := 0
	for _, e := range r.seen {
		if isMarker("metrics scrape failed")(e) {
			failures++
		}
	}
	if failures != 1 {
		t.Errorf("%d failure markers, want 1", failures)
	}
}

// A page that answers 404 from the start is not there (Ollama serves
// none): it is said once and not asked for again.
func TestPromNoMetricsPage(t *testing.T) {
	t.Parallel()
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/metrics"
	r := startProm(t, PromConfig{URL: url, Interval: 10 * time.Millisecond, Timeout: promTestTimeout})
	m := r.next("marker", isMarker("no metrics page")).Marker
	want := "no metrics page: " + url + " answers 404 Not Found; it is not asked again, and the server's own figures come from its responses alone"
	if m.Message != want {
		t.Errorf("marker %q, want %q", m.Message, want)
	}
	r.stop()
	if n := asked.Load(); n != 1 {
		t.Errorf("the page was asked for %d times, want once", n)
	}
}

// Each kind of bad scrape is reported, and a stale (here: empty) sample
// still goes out.
func TestPromFailureKinds(t *testing.T) {
	t.Parallel()
	vllm := promFixture(t, "vllm_v1_b.prom")
	// Port 1: never handed out as an ephemeral port, so no other test's
	// server can take it between here and the scrape.
	refused := "http://127.0.0.1:1/metrics"
	cases := []struct {
		name    string
		handler http.HandlerFunc
		url     string // instead of a server
		maxBody int64
		timeout time.Duration
		want    string
	}{
		{name: "500", handler: func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) },
			want: "500 Internal Server Error from "},
		{name: "garbage", handler: func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("<html>nope</html>\n")) },
			want: "parse metrics"},
		{name: "truncated", handler: func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(vllm[:len(vllm)/2])) },
			want: "unexpected end of input"},
		{name: "empty", handler: func(w http.ResponseWriter, r *http.Request) {}, want: "no metrics in response"},
		{name: "too large", handler: func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(vllm)) },
			maxBody: 1024, want: "metrics page over the limit: " + "%URL% has more than 1024 bytes; it is not scraped"},
		{name: "timeout", timeout: 50 * time.Millisecond, want: "no complete answer from",
			handler: func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-time.After(promWait):
				}
			}},
		{name: "connection refused", url: refused, want: "connection refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := tc.url
			if tc.handler != nil {
				srv := httptest.NewServer(tc.handler)
				t.Cleanup(srv.Close)
				url = srv.URL + "/metrics"
			}
			timeout := tc.timeout
			if timeout == 0 {
				timeout = promTestTimeout
			}
			r := startProm(t, PromConfig{URL: url, Interval: 100 * time.Millisecond, Timeout: timeout, MaxBodyBytes: tc.maxBody})
			m := r.next("failure marker", isMarker("")).Marker
			if want := strings.ReplaceAll(tc.want, "%URL%", url); !strings.Contains(m.Message, want) {
				t.Errorf("marker %q does not say %q", m.Message, want)
			}
			s := r.next("stale sample", isSample).Server
			if !s.Stale || s.Error != m.Message || s.Dialect != promdialect.Unknown || s.Waiting != nil {
				t.Errorf("stale sample = %+v", s)
			}
			r.stop() // a scrape in flight must not hold up the return
		})
	}
}

// Counters going down between scrapes are reported as a restart.
func TestPromReportsRestart(t *testing.T) {
	t.Parallel()
	srv, _ := promServer(t, promFixture(t, "vllm_v1_b.prom"), promFixture(t, "vllm_v1_a.prom"))
	r := startProm(t, PromConfig{URL: srv.URL + "/metrics", Interval: 30 * time.Millisecond, Timeout: promTestTimeout})
	r.next("restart marker", isMarker("metrics counters went down"))
}

// Cancelling the context ends Run promptly, even in the middle of a scrape
// that would otherwise hang for an hour, and is not reported as a failure.
func TestPromCancelDuringScrape(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-time.After(promWait):
		}
	}))
	t.Cleanup(srv.Close)
	r := startProm(t, PromConfig{URL: srv.URL, Interval: time.Hour, Timeout: time.Hour})
	select {
	case <-entered:
	case <-time.After(promWait):
		t.Fatal("no scrape arrived")
	}
	r.stop()
	for len(r.ch) > 0 {
		if e := <-r.ch; e.Marker != nil || (e.Server != nil && e.Server.Error != "") {
			t.Errorf("cancel reported as a failure: %+v", e)
		}
	}
}

func TestPromFixedDialectAndModel(t *testing.T) {
	t.Parallel()
	page := `# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="a"} 1
sglang:num_queue_reqs{model_name="b"} 4
`
	srv, _ := promServer(t, page)
	r := startProm(t, PromConfig{URL: srv.URL, Dialect: promdialect.SGLang, Model: "b", Interval: 30 * time.Millisecond, Timeout: promTestTimeout})
	s := r.next("sample", isSample).Server
	if s.Dialect != promdialect.SGLang {
		t.Errorf("dialect %q", s.Dialect)
	}
	promCheckPtr(t, "waiting", s.Waiting, promF(4))
}

func TestNewPromValidates(t *testing.T) {
	t.Parallel()
	bad := []PromConfig{
		{URL: ""},
		{URL: "localhost:8000/metrics"},
		{URL: "ftp://host/metrics"},
		{URL: "http://"},
		{URL: "http://host/metrics", Interval: -time.Second},
		{URL: "http://host/metrics", Timeout: -time.Second},
		{URL: "http://host/metrics", Dialect: "ollama"},
	}
	for _, cfg := range bad {
		if _, err := NewProm(cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
	p, err := NewProm(PromConfig{URL: "http://127.0.0.1:8000/metrics", Dialect: DialectAuto})
	if err != nil {
		t.Fatal(err)
	}
	if p.cfg.Interval != DefaultScrapeInterval || p.cfg.Timeout != DefaultScrapeInterval ||
		p.cfg.MaxBodyBytes != DefaultMaxBodyBytes || p.cfg.HTTPClient == nil || p.dialect != nil {
		t.Errorf("defaults not applied: %+v", p.cfg)
	}
}

func TestMetricsURLFor(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://127.0.0.1:8000":                     "http://127.0.0.1:8000/metrics",
		"https://user:pw@host:443/v1/chat?x=1#frag": "https://host:443/metrics",
		"http://[::1]:3000/v1":                      "http://[::1]:3000/metrics",
	} {
		if got, err := MetricsURLFor(in); err != nil || got != want {
			t.Errorf("MetricsURLFor(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "host:8000", "unix:///tmp/s", "http://"} {
		if got, err := MetricsURLFor(in); err == nil {
			t.Errorf("MetricsURLFor(%q) = %q, want an error", in, got)
		}
	}
}

// Scrape alone (one fetch, no loop) returns a parsed page or a worded error.
func TestPromScrapeOnce(t *testing.T) {
	t.Parallel()
	srv, _ := promServer(t, promFixture(t, "tgi_a.prom"))
	p, err := NewProm(PromConfig{URL: srv.URL + "/metrics"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.Scrape(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Source != srv.URL+"/metrics" || s.Time.IsZero() || DetectDialect(s).Name != promdialect.TGI {
		t.Errorf("scrape = %s %v %s", s.Source, s.Time, DetectDialect(s).Name)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Scrape(ctx); err == nil || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled scrape: %v", err)
	}
}

// End to end: scrape the simulator's real /metrics page while it serves a
// few requests. The sums over every interval must give back exactly what the
// requests did: each request observed once in e2e, and the prompt and
// generated tokens the responses' usage reports.
func TestPromAgainstSimulator(t *testing.T) {
	t.Parallel()
	prof, err := sim.ProfileByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.New(sim.Config{Profile: prof})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() { srv.Close(); _ = s.Close() })

	r := startProm(t, PromConfig{URL: srv.URL + "/metrics", Interval: 25 * time.Millisecond, Timeout: promTestTimeout})
	first := r.next("first sample", isFreshSample).Server
	if first.Dialect != promdialect.VLLM {
		t.Fatalf("dialect %q, want vllm", first.Dialect)
	}

	const requests, maxTokens = 4, 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	wantPrompt, wantGen := 0, 0
	for i := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, g, err := promSimChat(srv.URL, fmt.Sprintf("request %d: tell me about latency", i), maxTokens)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			wantPrompt += p
			wantGen += g
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	var e2e, prompt, gen float64
	sawRunning := false
	for e2e < requests || math.Round(prompt) < float64(wantPrompt) || math.Round(gen) < float64(wantGen) {
		smp := r.next("sample", isSample).Server
		if smp.Stale {
			t.Fatalf("stale sample: %s", smp.Error)
		}
		e2e += smp.Stages["e2e"].Count
		if smp.PromptTokensPerSec != nil {
			prompt += *smp.PromptTokensPerSec * smp.Interval.Seconds()
		}
		if smp.GenTokensPerSec != nil {
			gen += *smp.GenTokensPerSec * smp.Interval.Seconds()
		}
		if smp.Running != nil && smp.KVCache != nil && smp.Waiting != nil {
			sawRunning = true
		}
	}
	if e2e != requests {
		t.Errorf("e2e observations = %v, want %d", e2e, requests)
	}
	if math.Abs(prompt-float64(wantPrompt)) > 1e-6 || math.Abs(gen-float64(wantGen)) > 1e-6 {
		t.Errorf("tokens from rates = %v prompt, %v generated; usage says %d, %d", prompt, gen, wantPrompt, wantGen)
	}
	if !sawRunning {
		t.Error("no sample carried waiting, running and KV cache")
	}
}

// promSimChat sends one non-streamed chat request and returns its usage.
func promSimChat(base, prompt string, maxTokens int) (promptTokens, genTokens int, err error) {
	body, _ := json.Marshal(map[string]any{
		"model":      sim.DefaultModel,
		"messages":   []map[string]any{{"role": "user", "content": prompt}},
		"max_tokens": maxTokens,
		"ignore_eos": true,
	})
	ctx, cancel := context.WithTimeout(context.Background(), promWait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("chat: %s", resp.Status)
	}
	var out struct {
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, 0, fmt.Errorf("chat response: %w", err)
	}
	return out.Usage.PromptTokens, out.Usage.CompletionTokens, nil
}
