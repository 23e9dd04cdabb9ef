// Package deploy holds no Go code: this test checks the deployment files
// beside it (Kubernetes, Prometheus, Grafana) parse, and that every metric
// the Grafana dashboard queries is one the agent exports.
package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/latscope/latscope/agent"
)

func TestEveryYAMLFileParses(t *testing.T) {
	files, _ := filepath.Glob("*/*.yaml")
	if len(files) < 2 {
		t.Fatalf("found %v, want the Kubernetes and Prometheus files", files)
	}
	for _, f := range files {
		docs := decodeYAML(t, f)
		if len(docs) == 0 {
			t.Errorf("%s: no document", f)
		}
	}
}

func decodeYAML(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var docs []map[string]any
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		docs = append(docs, doc)
	}
}

func TestAgentsTakeTheTokenFromASecret(t *testing.T) {
	docs := decodeYAML(t, filepath.Join("kubernetes", "latscope-agents.yaml"))
	var kinds []string
	var deployment map[string]any
	for _, d := range docs {
		kinds = append(kinds, d["kind"].(string))
		if d["kind"] == "Deployment" {
			deployment = d
		}
	}
	if !slices.Contains(kinds, "Service") || deployment == nil {
		t.Fatalf("kinds %v: want a Deployment and a Service", kinds)
	}
	manifest, _ := os.ReadFile(filepath.Join("kubernetes", "latscope-agents.yaml"))
	for _, want := range []string{"secretKeyRef", "LATSCOPE_TOKEN", "--listen=0.0.0.0:7070", "/healthz"} {
		if !bytes.Contains(manifest, []byte(want)) {
			t.Errorf("the manifest lacks %q", want)
		}
	}
}

var metricName = regexp.MustCompile(`latscope_[a-z0-9_]+`)

func TestDashboardQueriesOnlyExportedMetrics(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("grafana", "latscope-agents.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct{ List []struct{ Query any } }
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	exported := agent.MetricNames()
	var exprs []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok {
			exprs = append(exprs, q)
		}
	}
	seen := 0
	for _, e := range exprs {
		for _, m := range metricName.FindAllString(e, -1) {
			seen++
			if !slices.Contains(exported, m) {
				t.Errorf("the dashboard queries %s, which the agent does not export (it exports %s)", m, strings.Join(exported, ", "))
			}
		}
	}
	if seen < 10 {
		t.Errorf("only %d metric references found: the check is not looking at the queries", seen)
	}
	for _, want := range []string{"latscope_breakdown_seconds_sum", "latscope_ttft_seconds_bucket", "latscope_itl_seconds_bucket", "latscope_server_requests_waiting"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
}

func TestPrometheusScrapesWithTheToken(t *testing.T) {
	docs := decodeYAML(t, filepath.Join("prometheus", "scrape.yaml"))
	jobs, _ := docs[0]["scrape_configs"].([]any)
	if len(jobs) == 0 {
		t.Fatal("no scrape_configs")
	}
	for _, j := range jobs {
		job := j.(map[string]any)
		auth, _ := job["authorization"].(map[string]any)
		if auth["credentials_file"] == nil {
			t.Errorf("job %v scrapes without the agent's token", job["job_name"])
		}
	}
}
