//go:build acceptance

package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/recorder"
)

// fleetAgent is one agent of the test's fleet, as Prometheus labels it.
type fleetAgent struct {
	name, region, addr, record string
}

// Three agents share one load against `latscope sim`; Debian's Prometheus
// scrapes them with static targets and deploy/'s labels and rules. Every
// rule file passes promtool, every dashboard query and recording rule
// returns a series, and the fleet TTFT p99 Prometheus computes from the
// summed buckets is within one bucket of the exact p99 of the three
// recordings merged.
func TestFleetOnPrometheus(t *testing.T) {
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("SKIPPED: prometheus is not installed (Debian's package: apt-get install prometheus; .ci/run installs it); the fleet's Prometheus acceptance test did not run")
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("SKIPPED: promtool is not installed (it comes with Debian's prometheus package); the fleet's Prometheus acceptance test did not run")
	}
	rules, _ := filepath.Glob(filepath.Join("prometheus", "rules", "*.yaml"))
	for _, f := range rules {
		if out, err := exec.Command(promtool, "check", "rules", f).CombinedOutput(); err != nil {
			t.Errorf("promtool check rules %s: %v\n%s", f, err, out)
		}
	}

	bin := buildLatscope(t)
	dir := t.TempDir()
	const token = "fleet-acceptance-token"
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}

	sim := start(t, "sim", bin, "sim", "--listen", "127.0.0.1:0")
	simURL := "http://" + sim.waitFor(t, regexp.MustCompile(`on http://(\S+)`), time.Minute)[1]

	agents := []*fleetAgent{{name: "agent-a", region: "eu-west"}, {name: "agent-b", region: "eu-west"}, {name: "agent-c", region: "us-east"}}
	procs := startShards(t, bin, simURL, dir, token, agents, "--rate", "15", "--duration", "20s",
		"--slo", "ttft.p99<2s,itl.p99<200ms")

	promAddr := freeAddr(t)
	cfg := staticConfig(t, dir, tokenFile, agents)
	if out, err := exec.Command(promtool, "check", "config", cfg).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config (static targets, deploy/'s labels and rules): %v\n%s", err, out)
	}
	pp := start(t, "prometheus", prom, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	api := &promAPI{t: t, base: "http://" + promAddr, proc: pp}

	// The agents' sessions end; their recordings are then complete.
	for i := range agents {
		procs[i].waitFor(t, regexp.MustCompile(`session over`), 2*time.Minute)
	}
	merged := readRecordings(t, agents...)
	if merged.ok < 200 {
		t.Fatalf("only %d successful requests in the recordings: the sim or the agents did not keep up", merged.ok)
	}
	// Prometheus has the whole run once its TTFT counts add up to the
	// recordings' (each scrape after the end reads the final counters).
	api.waitUntil(fmt.Sprintf("sum(latscope_ttft_seconds_count) == %d", len(merged.ttft)), 90*time.Second)
	// ... and the recording rules have been evaluated since.
	api.waitUntil(fmt.Sprintf("sum(fleet:latscope_requests:rate5m) > 0 and on() sum(latscope_requests_total) == %d", merged.requests), 30*time.Second)

	// Every query of the dashboard returns a series, over a window that
	// covers the run.
	for _, q := range dashboardQueries(t) {
		q = strings.NewReplacer("$__rate_interval", "5m", "$agent", ".*", "$region", ".*").Replace(q)
		if n := len(api.query(q)); n == 0 {
			t.Errorf("the dashboard's query returns no series: %s", q)
		}
	}
	// So does every recording rule.
	for _, r := range recordingRules(t) {
		if n := len(api.query(r)); n == 0 {
			t.Errorf("the recording rule %s has no series", r)
		}
	}
	// The fleet's TTFT p99 from the buckets summed across agents is within
	// one bucket of the exact p99 of the merged recordings.
	fleetP99 := api.scalar("histogram_quantile(0.99, sum by (le) (latscope_ttft_seconds_bucket))")
	exact := nearestRank(merged.ttft, 0.99)
	bounds := bucketBounds(api.query(`sum by (le) (latscope_ttft_seconds_bucket)`))
	lo, hi := oneBucketAround(bounds, exact)
	t.Logf("fleet TTFT p99: Prometheus %.4fs, exact %.4fs (%d requests from %d agents); within one bucket: [%.4f, %.4f]",
		fleetP99, exact, len(merged.ttft), len(agents), lo, hi)
	if !(fleetP99 >= lo && fleetP99 <= hi) {
		t.Errorf("fleet TTFT p99 from Prometheus %.4fs is not within one bucket of the exact %.4fs ([%.4f, %.4f])", fleetP99, exact, lo, hi)
	}
	// The shards between them sent the fleet's load, each its share.
	for _, a := range agents {
		n := api.scalar(fmt.Sprintf(`sum(latscope_requests_total{agent=%q})`, a.name))
		if n < float64(merged.requests)/6 {
			t.Errorf("agent %s sent %v of the fleet's %d requests: not its third", a.name, n, merged.requests)
		}
	}
}

// Three agents sharing a load (--shard i/3, one --seed, one --start-at)
// send what one agent at the whole rate sends right after: counts within
// 1%, TTFT p50 and p99 within 5% or with sampling intervals that overlap.
func TestShardsSendOneAgentsLoad(t *testing.T) {
	bin := buildLatscope(t)
	dir := t.TempDir()
	sim := start(t, "sim", bin, "sim", "--listen", "127.0.0.1:0")
	simURL := "http://" + sim.waitFor(t, regexp.MustCompile(`on http://(\S+)`), time.Minute)[1]
	load := []string{"--rate", "12", "--duration", "30s"}

	shards := []*fleetAgent{{name: "shard-0"}, {name: "shard-1"}, {name: "shard-2"}}
	for _, p := range startShards(t, bin, simURL, dir, "shard-acceptance-token", shards, load...) {
		p.waitFor(t, regexp.MustCompile(`session over`), 2*time.Minute)
	}
	fleet := readRecordings(t, shards...)
	whole := &fleetAgent{name: "whole"}
	for _, p := range startShards(t, bin, simURL, dir, "shard-acceptance-token", []*fleetAgent{whole}, load...) {
		p.waitFor(t, regexp.MustCompile(`session over`), 2*time.Minute)
	}
	one := readRecordings(t, whole)

	t.Logf("three shards: %d requests, TTFT p50 %.1f ms p99 %.1f ms; one agent: %d requests, TTFT p50 %.1f ms p99 %.1f ms",
		fleet.requests, 1000*nearestRank(fleet.ttft, 0.5), 1000*nearestRank(fleet.ttft, 0.99),
		one.requests, 1000*nearestRank(one.ttft, 0.5), 1000*nearestRank(one.ttft, 0.99))
	if d := math.Abs(float64(fleet.requests-one.requests)) / float64(one.requests); d > 0.01 {
		t.Errorf("three shards sent %d requests, one agent %d: %.1f%% apart, want within 1%%", fleet.requests, one.requests, 100*d)
	}
	// The premise is a host that keeps pace with four probes and the
	// simulator; where the probes said they were the bottleneck, say so.
	pace := ""
	if n := fleet.probeLimits + one.probeLimits; n > 0 {
		pace = fmt.Sprintf(" (the probes said %d times that they, not the server, were the bottleneck: this host did not keep pace)", n)
	}
	// Within 5%, or within the sampling spread of the quantile itself: a
	// p99 of 342 requests is about the fourth largest, and two runs of the
	// same load differ by more than 5% there by chance. Both runs are
	// samples, so each has its spread, the 95% interval of the quantile's
	// rank, q ± 1.96·√(q(1−q)/n): the two must overlap.
	interval := func(xs []float64, q float64) (lo, hi float64) {
		spread := 1.96 * math.Sqrt(q*(1-q)/float64(len(xs)))
		return nearestRank(xs, max(q-spread, 0)), nearestRank(xs, min(q+spread, 1))
	}
	for _, q := range []float64{0.5, 0.99} {
		f, o := nearestRank(fleet.ttft, q), nearestRank(one.ttft, q)
		flo, fhi := interval(fleet.ttft, q)
		lo, hi := interval(one.ttft, q)
		if d := math.Abs(f-o) / o; d > 0.05 && (fhi < lo || flo > hi) {
			t.Errorf("TTFT p%g: three shards %.1f ms [%.1f, %.1f], one agent %.1f ms [%.1f, %.1f]: %.1f%% apart, want within 5%% or sampling intervals that overlap%s",
				100*q, 1000*f, 1000*flo, 1000*fhi, 1000*o, 1000*lo, 1000*hi, 100*d, pace)
		}
	}
}

// startShards starts one agent per entry of agents against simURL, agent i
// with --shard i/N (N: len(agents), unsharded when 1), the same --seed and
// a --start-at a little ahead so their shares make one schedule; it returns
// once each serves, with its address set.
func startShards(t *testing.T, bin, simURL, dir, token string, agents []*fleetAgent, load ...string) []*process {
	t.Helper()
	serving := regexp.MustCompile(`serving http://(\S+)/events`)
	startAt := time.Now().Add(15 * time.Second).UTC().Format(time.RFC3339)
	procs := make([]*process, len(agents))
	for i, a := range agents {
		a.record = filepath.Join(dir, a.name+".lsr")
		args := []string{"agent", "--url", simURL, "--listen", "127.0.0.1:0", "--token", token,
			"--name", a.name, "--seed", "7", "--start-at", startAt,
			"--prompt-tokens", "256", "--output-tokens", "32",
			"--record", a.record, "--no-gpu", "--quiet", "--linger", "10m"}
		if a.region != "" {
			args = append(args, "--region", a.region)
		}
		if len(agents) > 1 {
			args = append(args, "--shard", fmt.Sprintf("%d/%d", i, len(agents)))
		}
		procs[i] = start(t, a.name, bin, append(args, load...)...)
		a.addr = procs[i].waitFor(t, serving, time.Minute)[1]
	}
	return procs
}

// staticConfig writes deploy/prometheus/static.yaml with the test's targets,
// token file and deploy/'s rule files, scraping and evaluating every second.
func staticConfig(t *testing.T, dir, tokenFile string, agents []*fleetAgent) string {
	t.Helper()
	rules, err := filepath.Abs(filepath.Join("prometheus", "rules"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - %s/*.yaml\n", rules)
	fmt.Fprintf(&b, "scrape_configs:\n  - job_name: latscope-agents\n    metrics_path: /metrics\n")
	fmt.Fprintf(&b, "    authorization:\n      type: Bearer\n      credentials_file: %s\n    static_configs:\n", tokenFile)
	for i, a := range agents {
		fmt.Fprintf(&b, "      - targets: [%q]\n        labels:\n          agent: %s\n          region: %s\n          shard: \"%d\"\n", a.addr, a.name, a.region, i)
	}
	path := filepath.Join(dir, "prometheus.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	// The labels must be those deploy/'s static config gives its targets.
	for _, label := range []string{"agent:", "region:"} {
		if static, _ := os.ReadFile(filepath.Join("prometheus", "static.yaml")); !strings.Contains(string(static), label) {
			t.Fatalf("deploy/prometheus/static.yaml gives its targets no %s label, which this test's config does", label)
		}
	}
	return path
}

// merged is what the three recordings hold together.
type merged struct {
	requests, ok int
	probeLimits  int       // probe_limit markers: the probe, not the server, was the bottleneck
	ttft         []float64 // seconds, successful requests (as the agents' histograms take them)
}

func readRecordings(t *testing.T, agents ...*fleetAgent) merged {
	t.Helper()
	var m merged
	for _, a := range agents {
		r, err := recorder.Open(a.record)
		if err != nil {
			t.Fatalf("%s: %v", a.record, err)
		}
		for {
			ev, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", a.record, err)
			}
			if ev.Marker != nil && ev.Marker.Kind == event.MarkerProbeLimit {
				m.probeLimits++
			}
			req := ev.Request
			if ev.Kind != event.KindRequest || req == nil || req.Warmup {
				continue
			}
			m.requests++
			if req.OK() {
				m.ok++
				if req.TTFT > 0 {
					m.ttft = append(m.ttft, req.TTFT.Seconds())
				}
			}
		}
		r.Close()
	}
	return m
}

// nearestRank is the q-quantile of xs by the nearest-rank method.
func nearestRank(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(i, 0)]
}

// bucketBounds are the finite le bounds of a histogram's series, sorted.
func bucketBounds(series []promSample) []float64 {
	var out []float64
	for _, s := range series {
		le, err := strconv.ParseFloat(s.Metric["le"], 64)
		if err == nil && !math.IsInf(le, 0) {
			out = append(out, le)
		}
	}
	sort.Float64s(out)
	return out
}

// oneBucketAround is the bucket holding x widened by one bucket each side.
func oneBucketAround(bounds []float64, x float64) (lo, hi float64) {
	i := sort.SearchFloat64s(bounds, x) // bounds[i-1] < x <= bounds[i]: x's bucket is i
	lo, hi = 0, math.Inf(1)
	if i-2 >= 0 {
		lo = bounds[i-2]
	}
	if i+1 < len(bounds) {
		hi = bounds[i+1]
	}
	return lo, hi
}

// promAPI queries Prometheus' HTTP API.
type promAPI struct {
	t    *testing.T
	base string
	proc *process
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (p *promAPI) query(q string) []promSample {
	p.t.Helper()
	res, err := p.try(q)
	if err != nil {
		p.t.Fatalf("query %s: %v", q, err)
	}
	return res
}

func (p *promAPI) try(q string) ([]promSample, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(p.base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string       `json:"resultType"`
			Result     []promSample `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("%s: %w", resp.Status, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("%s: %s", resp.Status, body.Error)
	}
	return body.Data.Result, nil
}

// scalar is the value of a query that returns one series.
func (p *promAPI) scalar(q string) float64 {
	p.t.Helper()
	res := p.query(q)
	if len(res) != 1 {
		p.t.Fatalf("query %s: %d series, want 1", q, len(res))
	}
	s, _ := res[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		p.t.Fatalf("query %s: value %v: %v", q, res[0].Value, err)
	}
	return v
}

// waitUntil polls Prometheus until q returns a series: Prometheus tells no
// one when it has scraped, so its API is asked again each half second,
// within a deadline.
func (p *promAPI) waitUntil(q string, within time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var last error
	for time.Now().Before(deadline) {
		res, err := p.try(q)
		if err == nil && len(res) > 0 {
			return
		}
		last = err
		<-tick.C
	}
	p.t.Fatalf("Prometheus did not answer %s within %s (last error: %v)", q, within, last)
}

// deploy/prometheus/kubernetes.yaml passes upstream promtool's check (Debian's
// is built without Kubernetes discovery and refuses it). Upstream's builds
// from the Go module proxy:
//
//	d=$(go mod download -json github.com/prometheus/prometheus@v0.55.1 | jq -r .Dir)
//	(cd "$d" && go build -o /usr/local/bin/promtool-upstream ./cmd/promtool)
//	LATSCOPE_UPSTREAM_PROMTOOL=/usr/local/bin/promtool-upstream go test -tags acceptance ./deploy -run Upstream
func TestKubernetesConfigPassesUpstreamPromtool(t *testing.T) {
	promtool := os.Getenv("LATSCOPE_UPSTREAM_PROMTOOL")
	if promtool == "" {
		t.Skip("SKIPPED: LATSCOPE_UPSTREAM_PROMTOOL does not name an upstream promtool (one with Kubernetes discovery); deploy/prometheus/kubernetes.yaml was not checked")
	}
	b, err := os.ReadFile(filepath.Join("prometheus", "kubernetes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The token file and the rules must exist where the config says.
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	rules, err := filepath.Abs(filepath.Join("prometheus", "rules"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.NewReplacer("/etc/prometheus/latscope/token", token, "/etc/prometheus/latscope/rules", rules).Replace(string(b))
	path := filepath.Join(dir, "kubernetes.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "config", path).CombinedOutput()
	if err != nil {
		t.Fatalf("upstream promtool check config deploy/prometheus/kubernetes.yaml: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// dashboardQueries are the PromQL queries of the dashboard's panels.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("grafana", "latscope-agents.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	var out []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	return out
}
