package collector

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// startGPUExporter runs a GPUExporter for cfg until the test ends; its
// events are read with next, as a Prom's are.
func startGPUExporter(t *testing.T, cfg GPUExporterConfig) *promRun {
	t.Helper()
	if cfg.Interval == 0 {
		cfg.Interval = 20 * time.Millisecond
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = promTestTimeout
	}
	g, err := NewGPUExporter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &promRun{t: t, ch: make(chan event.Event, 64), cancel: cancel, done: make(chan error, 1)}
	emit := func(e event.Event) {
		b, err := event.Marshal(e)
		if err == nil {
			_, err = event.Unmarshal(b)
		}
		if err != nil {
			t.Errorf("event does not survive encoding: %v", err)
		}
		select {
		case r.ch <- e:
		case <-ctx.Done():
		}
	}
	go func() { r.done <- g.Run(ctx, emit) }()
	t.Cleanup(r.stop)
	return r
}

// gpuPageServer serves page while healthy is set (or always when healthy is
// nil), else a 500.
func gpuPageServer(t *testing.T, page string, healthy *atomic.Bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(gpuPageHandler(page, healthy, nil))
	t.Cleanup(srv.Close)
	return srv
}

func gpuPageHandler(page string, healthy *atomic.Bool, hosts *sync.Map) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hosts != nil {
			hosts.Store(r.Host, true)
		}
		if healthy != nil && !healthy.Load() {
			http.Error(w, "exporter restarting", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write([]byte(page))
	})
}

func isGPUSample(e event.Event) bool { return e.GPU != nil }

func isFreshGPUSample(e event.Event) bool {
	return e.GPU != nil && e.GPU.Available && !slices.ContainsFunc(e.GPU.Devices, func(d event.GPUDevice) bool { return d.Stale })
}

// isGPUMarker matches the GPU exporter collector's markers that start with prefix.
func isGPUMarker(prefix string) func(event.Event) bool {
	return func(e event.Event) bool {
		return e.Marker != nil && e.Marker.Source == gpuExporterSource && strings.HasPrefix(e.Marker.Message, prefix)
	}
}

// Two nodes' exporters, NVIDIA's and AMD's, in one sample: each GPU says
// which page and node it came from.
func TestGPUExporterScrapesSeveralNodes(t *testing.T) {
	t.Parallel()
	nv := gpuPageServer(t, gpuFixture(t, "dcgm_default.prom"), nil)
	amd := gpuPageServer(t, gpuFixture(t, "amd_mi300x.prom"), nil)
	nvURL, amdURL := nv.URL+"/metrics", amd.URL+"/metrics"
	r := startGPUExporter(t, GPUExporterConfig{URLs: []string{nvURL, amdURL}})
	g := r.next("a GPU sample", isGPUSample).GPU
	if !g.Available || g.Collector != event.GPUCollectorExporter || g.Simulated || len(g.Devices) != 4 {
		t.Fatalf("sample = %+v, want 4 GPUs from the exporters", g)
	}
	want := []struct{ source, url, host string }{
		{event.GPUSourceDCGM, nvURL, "gpu-node-a"}, {event.GPUSourceDCGM, nvURL, "gpu-node-a"},
		{event.GPUSourceAMD, amdURL, "mi300-node-1"}, {event.GPUSourceAMD, amdURL, "mi300-node-1"},
	}
	for i, d := range g.Devices {
		if d.Source != want[i].source || d.SourceURL != want[i].url || d.Host != want[i].host || d.Stale {
			t.Errorf("device %d from %s %s on %s (stale %v), want %+v", i, d.Source, d.SourceURL, d.Host, d.Stale, want[i])
		}
	}
	if g.Devices[0].UtilGPU != 97 || g.Devices[2].UtilGPU != 94 {
		t.Errorf("utilisations %d, %d: want the pages' 97 and 94", g.Devices[0].UtilGPU, g.Devices[2].UtilGPU)
	}
	if !g.Time.After(time.Time{}) {
		t.Errorf("sample without a time")
	}
}

// A page that fails keeps its GPUs on show, marked stale, says so once, and
// says when it is back; the other page's GPUs stay fresh meanwhile.
func TestGPUExporterStaleAndRecovery(t *testing.T) {
	t.Parallel()
	var healthy atomic.Bool
	healthy.Store(true)
	flaky := gpuPageServer(t, gpuFixture(t, "dcgm_default.prom"), &healthy)
	steady := gpuPageServer(t, gpuFixture(t, "amd_mi210.prom"), nil)
	r := startGPUExporter(t, GPUExporterConfig{URLs: []string{flaky.URL, steady.URL}})
	r.next("a fresh sample", isFreshGPUSample)

	healthy.Store(false)
	m := r.next("a failure marker", isGPUMarker("GPU metrics scrape failed")).Marker
	if want := "GPU metrics scrape failed: 500 Internal Server Error from " + flaky.URL; m.Message != want || m.Kind != event.MarkerCollector {
		t.Errorf("marker %q (%s), want %q", m.Message, m.Kind, want)
	}
	g := r.next("a sample after the failure", isGPUSample).GPU
	if !g.Available || len(g.Devices) != 3 {
		t.Fatalf("sample %+v, want the failing page's 2 GPUs and the other's 1", g)
	}
	for _, d := range g.Devices {
		if d.Stale != (d.SourceURL == flaky.URL) {
			t.Errorf("%s GPU %d stale %v: only the failing page's are stale", d.SourceURL, d.Index, d.Stale)
		}
	}
	r.next("another sample while failing", isGPUSample)

	healthy.Store(true)
	r.next("a recovery marker", isGPUMarker("GPU metrics scrape recovered: "+flaky.URL))
	r.next("a fresh sample", isFreshGPUSample)
	failures := 0
	for _, e := range r.seen {
		if isGPUMarker("GPU metrics scrape failed")(e) {
			failures++
		}
	}
	if failures != 1 {
		t.Errorf("%d failure markers for one outage, want 1", failures)
	}
}

// Pointed at a page with no GPU on it, the collector says what it found,
// and the sample says there is no GPU to show.
func TestGPUExporterUnavailable(t *testing.T) {
	t.Parallel()
	srv := gpuPageServer(t, promFixture(t, "vllm_v1_a.prom"), nil)
	r := startGPUExporter(t, GPUExporterConfig{URLs: []string{srv.URL + "/metrics"}})
	g := r.next("a GPU sample", isGPUSample).GPU
	want := gpuMetricsUnavailablePrefix + "GPU metrics scrape failed: " + srv.URL + "/metrics: " + ErrNoGPUMetrics.Error()
	if g.Available || g.Reason != want || g.Collector != event.GPUCollectorExporter {
		t.Errorf("sample %+v, want unavailable: %q", g, want)
	}
	r.next("a second sample", isGPUSample)
	n := 0
	for _, e := range r.seen {
		if e.Marker != nil {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d markers for one unchanging failure, want 1", n)
	}
}

// A page over the limits, a server that never answers and a refused
// connection each fail with their own words, without the URL's password.
func TestGPUExporterFailures(t *testing.T) {
	t.Parallel()
	big := gpuPageServer(t, gpuFixture(t, "dcgm_default.prom"), nil)
	hang := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	t.Cleanup(func() { close(hang); silent.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	cases := []struct {
		name string
		cfg  GPUExporterConfig
		want string
	}{
		{"over the line limit", GPUExporterConfig{URLs: []string{big.URL}, MaxLines: 10},
			"metrics page over the limit: " + big.URL + " has more than 10 lines; it is not scraped"},
		{"no answer", GPUExporterConfig{URLs: []string{silent.URL}, Timeout: 50 * time.Millisecond},
			"GPU metrics scrape failed: no complete answer from " + silent.URL + " within 50ms"},
		{"refused, with credentials", GPUExporterConfig{URLs: []string{"http://scraper:s3cret@" + closed + "/metrics"}},
			"GPU metrics scrape failed: http://REDACTED@" + closed + "/metrics: dial tcp " + closed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := startGPUExporter(t, tc.cfg)
			m := r.next("a failure marker", isGPUMarker("")).Marker
			if !strings.HasPrefix(m.Message, tc.want) || strings.Contains(m.Message, "s3cret") {
				t.Errorf("marker %q, want it to start %q", m.Message, tc.want)
			}
			if g := r.next("a sample", isGPUSample).GPU; g.Available || !strings.HasSuffix(g.Reason, m.Message) {
				t.Errorf("sample %+v, want unavailable saying %q", g, m.Message)
			}
		})
	}
}

// A dns+ URL scrapes every address its name resolves to (a headless
// Service's exporter pods), asking each for the name; an address that goes
// away takes its GPUs with it, and a name that stops resolving leaves the
// last GPUs on show, stale.
func TestGPUExporterEveryAddress(t *testing.T) {
	t.Parallel()
	a, b := listenTwoLoopbacks(t)
	var hosts sync.Map
	for ln, page := range map[net.Listener]string{a: gpuFixture(t, "dcgm_default.prom"), b: gpuFixture(t, "dcgm_mig_shared.prom")} {
		srv := &http.Server{Handler: gpuPageHandler(page, nil, &hosts), ReadHeaderTimeout: promTestTimeout}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
	_, port, _ := net.SplitHostPort(a.Addr().String())
	type resolved struct {
		addrs []string
		err   error
	}
	var answer atomic.Pointer[resolved]
	answer.Store(&resolved{addrs: []string{"127.0.0.2", "127.0.0.1", "127.0.0.2"}})
	lookup := func(_ context.Context, host string) ([]string, error) {
		if host != "exporters.test" {
			return nil, errors.New("unexpected name " + host)
		}
		a := answer.Load()
		return slices.Clone(a.addrs), a.err
	}
	r := startGPUExporter(t, GPUExporterConfig{URLs: []string{"dns+http://exporters.test:" + port + "/metrics"}, LookupHost: lookup})

	g := r.next("a sample from both", isGPUSample).GPU
	byURL := map[string]int{}
	for _, d := range g.Devices {
		byURL[d.SourceURL]++
	}
	urlA, urlB := "http://127.0.0.1:"+port+"/metrics", "http://127.0.0.2:"+port+"/metrics"
	if len(g.Devices) != 5 || byURL[urlA] != 2 || byURL[urlB] != 3 {
		t.Fatalf("devices by page %v, want 2 from %s and 3 from %s", byURL, urlA, urlB)
	}
	if _, ok := hosts.Load("exporters.test:" + port); !ok {
		t.Errorf("the exporters were not asked for the name: Host headers %v", syncKeys(&hosts))
	}

	answer.Store(&resolved{addrs: []string{"127.0.0.1"}})
	r.next("a sample from the one left", func(e event.Event) bool { return isGPUSample(e) && len(e.GPU.Devices) == 2 })

	answer.Store(&resolved{err: &net.DNSError{Err: "no such host", Name: "exporters.test", IsNotFound: true}})
	m := r.next("a resolve failure", isGPUMarker("GPU metrics scrape failed")).Marker
	if !strings.Contains(m.Message, "resolve exporters.test") {
		t.Errorf("marker %q, want it to name the lookup", m.Message)
	}
	g = r.next("a sample after it", isGPUSample).GPU
	if len(g.Devices) != 2 || !g.Devices[0].Stale || g.Devices[0].SourceURL != urlA {
		t.Errorf("devices %s, want the last 2 from %s, stale", showGPUs(g.Devices), urlA)
	}
}

// listenTwoLoopbacks listens on 127.0.0.1 and 127.0.0.2 at one port, as
// a headless Service's pods all serve one port.
func listenTwoLoopbacks(t *testing.T) (net.Listener, net.Listener) {
	t.Helper()
	for range 20 { // another process may hold the port on 127.0.0.2
		a, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(a.Addr().String())
		b, err := net.Listen("tcp", "127.0.0.2:"+port)
		if err == nil {
			t.Cleanup(func() { a.Close(); b.Close() })
			return a, b
		}
		a.Close()
	}
	t.Fatal("no port free on both 127.0.0.1 and 127.0.0.2")
	return nil, nil
}

func syncKeys(m *sync.Map) []any {
	var keys []any
	m.Range(func(k, _ any) bool { keys = append(keys, k); return true })
	return keys
}

func TestNewGPUExporterRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  GPUExporterConfig
		want string
	}{
		{GPUExporterConfig{}, "GPU metrics: no exporter URL"},
		{GPUExporterConfig{URLs: []string{"dcgm-exporter:9400"}}, `GPU metrics url "dcgm-exporter:9400": want http(s)://host[:port]/path`},
		{GPUExporterConfig{URLs: []string{"dns+https://a:9400/metrics"}}, `GPU metrics url "dns+https://a:9400/metrics": dns+ takes http://host:port/path`},
		{GPUExporterConfig{URLs: []string{"dns+http://u:pw@a/metrics"}}, `GPU metrics url "dns+http://REDACTED@a/metrics": dns+ takes http://host:port/path`},
		{GPUExporterConfig{URLs: []string{"http://a"}, Interval: -time.Second}, "GPU metrics: interval, timeout and page limits must not be negative"},
	} {
		if _, err := NewGPUExporter(tc.cfg); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// Probe reads each page once for the CLI's line: what it found, and which
// pages failed.
func TestGPUExporterProbe(t *testing.T) {
	t.Parallel()
	nv := gpuPageServer(t, gpuFixture(t, "dcgm_default.prom"), nil)
	amd := gpuPageServer(t, gpuFixture(t, "amd_mi300x.prom"), nil)
	var neverHealthy atomic.Bool
	broken := gpuPageServer(t, "", &neverHealthy)
	ctx := context.Background()
	g, err := NewGPUExporter(GPUExporterConfig{URLs: []string{nv.URL, amd.URL, broken.URL}, Timeout: promTestTimeout})
	if err != nil {
		t.Fatal(err)
	}
	ok, line := g.Probe(ctx)
	want := "GPU metrics: 4 GPUs (dcgm, amd) on gpu-node-a, mi300-node-1; GPU metrics scrape failed: 500 Internal Server Error from " + broken.URL
	if !ok || line != want {
		t.Errorf("Probe = %v, %q; want true, %q", ok, line, want)
	}
	g, err = NewGPUExporter(GPUExporterConfig{URLs: []string{broken.URL}, Timeout: promTestTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if ok, line := g.Probe(ctx); ok || line != gpuMetricsUnavailablePrefix+"GPU metrics scrape failed: 500 Internal Server Error from "+broken.URL {
		t.Errorf("Probe of a failing page = %v, %q", ok, line)
	}
}
