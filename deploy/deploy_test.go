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
	more, _ := filepath.Glob("*/*/*.yaml")
	files = append(files, more...)
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

// A metric the agent exports: latscope_*, not inside a recording rule's
// name (level:latscope_*:operations), which the rules define.
var (
	metricName   = regexp.MustCompile(`(?:^|[^:a-z0-9_])(latscope_[a-z0-9_]+)`)
	recordedName = regexp.MustCompile(`[a-z_]+:latscope_[a-z0-9_]+:[a-z0-9_]+`)
)

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
	recorded := recordingRules(t)
	for _, e := range exprs {
		for _, r := range recordedName.FindAllString(e, -1) {
			if !slices.Contains(recorded, r) {
				t.Errorf("the dashboard queries %s, which no recording rule defines", r)
			}
		}
		for _, sub := range metricName.FindAllStringSubmatch(e, -1) {
			m := sub[1]
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
	for _, f := range []string{"kubernetes.yaml", "static.yaml"} {
		docs := decodeYAML(t, filepath.Join("prometheus", f))
		jobs, _ := docs[0]["scrape_configs"].([]any)
		if len(jobs) == 0 {
			t.Fatalf("%s: no scrape_configs", f)
		}
		for _, j := range jobs {
			job := j.(map[string]any)
			auth, _ := job["authorization"].(map[string]any)
			if auth["credentials_file"] == nil {
				t.Errorf("%s: job %v scrapes without the agent's token", f, job["job_name"])
			}
			// The rules' agent-down alert looks for this job.
			if job["job_name"] != "latscope-agents" {
				t.Errorf("%s: job %v, want latscope-agents", f, job["job_name"])
			}
		}
		if rf, _ := docs[0]["rule_files"].([]any); len(rf) == 0 {
			t.Errorf("%s: loads no rules", f)
		}
	}
}

// ruleGroups are deploy/prometheus/rules/*.yaml, decoded.
type ruleGroups struct {
	Groups []struct {
		Name  string
		Rules []struct {
			Record, Alert, Expr string
		}
	}
}

func ruleFiles(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("prometheus", "rules", "*.yaml"))
	if len(files) < 2 {
		t.Fatalf("rule files %v: want the recording rules and the alerts", files)
	}
	return files
}

func readRules(t *testing.T, path string) ruleGroups {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var g ruleGroups
	if err := yaml.Unmarshal(b, &g); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return g
}

// recordingRules names every rule the rule files record.
func recordingRules(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, f := range ruleFiles(t) {
		for _, g := range readRules(t, f).Groups {
			for _, r := range g.Rules {
				if r.Record != "" {
					out = append(out, r.Record)
				}
			}
		}
	}
	return out
}

// The alerts the issue asks for are there: a multi-window burn-rate pair
// (page and ticket) for each SLO, the probe's health and agents down.
func TestAlertsCoverEverySLOAndTheAgents(t *testing.T) {
	var alerts []string
	exprs := map[string]string{}
	for _, f := range ruleFiles(t) {
		for _, g := range readRules(t, f).Groups {
			for _, r := range g.Rules {
				if r.Alert != "" {
					alerts = append(alerts, r.Alert)
					exprs[r.Alert] = r.Expr
				}
			}
		}
	}
	for _, slo := range []string{"TTFT", "ITL", "Goodput"} {
		for _, sev := range []string{"Page", "Ticket"} {
			name := "Latscope" + slo + "BudgetBurn" + sev
			e, ok := exprs[name]
			if !ok {
				t.Errorf("no alert %s (alerts: %v)", name, alerts)
				continue
			}
			// Multi-window: each burn rate is checked over a long and a short window.
			words := strings.Fields(e)
			if count(words, "and") != 2 || count(words, "or") != 1 {
				t.Errorf("%s: %q is not two burn rates over two windows each", name, e)
			}
		}
	}
	for _, name := range []string{"LatscopeProbeUnhealthy", "LatscopeAgentDown"} {
		if !slices.Contains(alerts, name) {
			t.Errorf("no alert %s (alerts: %v)", name, alerts)
		}
	}
}

func count(words []string, w string) int {
	n := 0
	for _, x := range words {
		if x == w {
			n++
		}
	}
	return n
}
