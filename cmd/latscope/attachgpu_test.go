package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// gpuExporterPage serves one of the collector's exporter fixtures over
// loopback HTTP; scraped receives once the page has been fetched twice
// (the first is the check before the run, the second a sample of it).
func gpuExporterPage(t *testing.T, fixture string) (url string, scraped <-chan struct{}) {
	t.Helper()
	page, err := os.ReadFile("../../collector/testdata/gpu_exporter/" + fixture)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(page)
		if n.Add(1) == 2 {
			close(done)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics", done
}

// simAfter serves the tiny simulator, holding each completion until every
// channel of ready has closed (or 30 s passed), so that a run's requests
// cannot all end before the GPUs were sampled, however slow the host.
func simAfter(t *testing.T, ready ...<-chan struct{}) string {
	t.Helper()
	sim := tinySim(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/completions") {
			deadline := time.After(30 * time.Second)
			for _, c := range ready {
				select {
				case <-c:
				case <-deadline:
				}
			}
		}
		sim.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// An agent reads the GPUs of two nodes from their exporters' pages (NVIDIA's
// dcgm-exporter and AMD's device-metrics-exporter, served over HTTP), and
// attach, connected to the running agent, shows every GPU with the
// exporter and node it came from.
func TestAttachShowsAgentsExporterGPUs(t *testing.T) {
	dcgm, dcgmScraped := gpuExporterPage(t, "dcgm_default.prom")
	amd, amdScraped := gpuExporterPage(t, "amd_mi300x.prom")
	url := simAfter(t, dcgmScraped, amdScraped)
	// The run's requests wait for the pages' first scrape of the run; the
	// next is 30 s later (its timeout too, so a slow host cannot fail the
	// first), after the run: the GPUs attach shows last are that scrape's.
	agent := startAgent(t, "--url", url, "-n", "4", "-c", "2", "--prompt-tokens", "16", "--output-tokens", "4",
		"--gpu-metrics-url", dcgm+","+amd, "--gpu-interval", "30s", "--linger", "30s", "--quiet")
	out, stderr, err := execute(t, "attach", "http://"+agent.addr, "--no-tui", "--json")
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, stderr)
	}
	agent.wait()
	if !strings.Contains(agent.stderr.String(), "GPU metrics: 4 GPUs (dcgm, amd)") {
		t.Errorf("the agent does not say where its GPUs come from:\n%s", agent.stderr.String())
	}
	var got struct {
		Agents map[string]aggregate.Summary `json:"agents"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("attach --json: %v\n%s", err, out)
	}
	if len(got.Agents) != 1 {
		t.Fatalf("attach shows %d agents, want 1:\n%s", len(got.Agents), out)
	}
	for name, s := range got.Agents {
		if s.GPU == nil || !s.GPU.Available || s.GPU.Collector != event.GPUCollectorExporter {
			t.Fatalf("agent %s: gpu = %+v, want the exporters' GPUs", name, s.GPU)
		}
		var shown []string
		for _, d := range s.GPU.Devices {
			shown = append(shown, d.Source+" "+d.Host+" "+d.Name+" "+strings.TrimPrefix(d.SourceURL, "http://"))
		}
		slices.Sort(shown)
		want := []string{
			"amd mi300-node-1 AMD Instinct MI300X " + strings.TrimPrefix(amd, "http://"),
			"amd mi300-node-1 AMD Instinct MI300X " + strings.TrimPrefix(amd, "http://"),
			"dcgm gpu-node-a NVIDIA H100 80GB HBM3 " + strings.TrimPrefix(dcgm, "http://"),
			"dcgm gpu-node-a NVIDIA H100 80GB HBM3 " + strings.TrimPrefix(dcgm, "http://"),
		}
		if !slices.Equal(shown, want) {
			t.Errorf("agent %s: GPUs shown\n  %s\nwant\n  %s", name, strings.Join(shown, "\n  "), strings.Join(want, "\n  "))
		}
	}
}
