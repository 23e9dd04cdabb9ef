package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// The GPUs come from a dcgm-exporter page served over HTTP when
// --gpu-metrics-url names it, and the summary says where they came from.
func TestRunReadsGPUsFromExporter(t *testing.T) {
	page, err := os.ReadFile("../../collector/testdata/gpu_exporter/dcgm_default.prom")
	if err != nil {
		t.Fatal(err)
	}
	// The run's requests wait for the exporter's second scrape (the first
	// is the check before the run), so the run cannot end before a sample
	// from it, however slow the host.
	var scrapes atomic.Int32
	scraped := make(chan struct{})
	exporter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(page)
		if scrapes.Add(1) == 2 {
			close(scraped)
		}
	}))
	t.Cleanup(exporter.Close)
	sim := tinySim(t)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/completions") {
			select {
			case <-scraped:
			case <-time.After(10 * time.Second):
			}
		}
		sim.ServeHTTP(w, r)
	}))
	t.Cleanup(server.Close)
	url := server.URL
	stdout, stderr, err := execute(t, "run", "--url", url, "--no-tui", "--json", "-n", "4",
		"--prompt-tokens", "16", "--output-tokens", "4", "--gpu-metrics-url", exporter.URL+"/metrics")
	if err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "GPU metrics: 2 GPUs (dcgm)") {
		t.Errorf("stderr does not say where the GPUs came from:\n%s", stderr)
	}
	var got struct {
		GPU *event.GPUSample `json:"gpu"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v", err)
	}
	if got.GPU == nil || !got.GPU.Available || got.GPU.Collector != event.GPUCollectorExporter || len(got.GPU.Devices) != 2 {
		t.Fatalf("gpu = %+v, want 2 devices from the exporter", got.GPU)
	}
}

func TestGPUMetricsURLRefusesNVMLIndices(t *testing.T) {
	url := serveTinySim(t)
	_, _, err := execute(t, "run", "--url", url, "--no-tui", "-n", "1", "--gpu", "0", "--gpu-metrics-url", "http://127.0.0.1:1/metrics")
	if err == nil || !strings.Contains(err.Error(), "--gpu-metrics-url") {
		t.Fatalf("err = %v, want --gpu refused beside --gpu-metrics-url", err)
	}
}
