package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/recorder"
)

// The golden summaries pin what the commands print, so that moving their
// wiring out of package main cannot change it unnoticed. replay and attach
// read fixed events (a recording, two agents' streams), so their summaries
// are golden whole, apart from the fields that say when and where they ran.
// demo and run measure real time on the simulator, so only what does not
// depend on the host's speed is golden: the session header, the request
// counts, the sections the JSON summary always has, and what stderr says
// before the run (the status lines and the timed fields are left out).
//
// go test ./cmd/latscope -run Golden -update rewrites testdata/golden.

var update = flag.Bool("update", false, "rewrite testdata/golden from what the commands print")

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from %s:\n--- got\n%s\n--- want\n%s", name, path, got, want)
	}
}

// goldenRecording writes a recording of 40 requests with fixed times, two
// of them failed, a server sample and a marker among them.
func goldenRecording(t *testing.T, path string) {
	t.Helper()
	start := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	w, err := recorder.Create(path, &event.Session{Time: start, Latscope: "golden", RunID: "golden01", Name: "golden", Host: "host",
		Target: "http://127.0.0.1:8000", Server: "vllm", Dialect: "openai-chat", Model: "m",
		Load: event.Load{Mode: "closed", Concurrency: 2, PromptTokens: "64", OutputTokens: "4", Requests: 40, Seed: 7, SLO: "ttft.p99<1s"}}, recorder.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		at := start.Add(time.Duration(i) * 250 * time.Millisecond)
		r := goldenRequest(fmt.Sprintf("g-%d", i), at, time.Duration(80+(i*37)%60)*time.Millisecond)
		if i%17 == 5 {
			r.Outcome, r.Status, r.Error, r.Chunks, r.OutputTokens = event.OutcomeHTTPStatus, 503, "overloaded", nil, 0
		}
		if err := w.Write(event.NewRequest(r)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// goldenRequest is a successful request of four tokens, 10 ms apart.
func goldenRequest(id string, at time.Time, ttft time.Duration) *event.Request {
	r := &event.Request{ID: id, Dialect: "openai-chat", Intended: at, Start: at, Outcome: event.OutcomeOK,
		TTFT: ttft, E2E: ttft + 30*time.Millisecond, OutputTokens: 4, PromptTokens: 64}
	for k := range 4 {
		r.Chunks = append(r.Chunks, event.Chunk{At: ttft + time.Duration(k)*10*time.Millisecond, Tokens: 1})
	}
	return r
}

var (
	goldenClock   = regexp.MustCompile(`\b\d\d:\d\d:\d\d(\.\d+)?\b`)
	goldenAddr    = regexp.MustCompile(`127\.0\.0\.1:\d+`)
	goldenTempDir = regexp.MustCompile(`/tmp/\S+/`)
)

// stable replaces what says where and when a command ran.
func stable(s string) string {
	s = goldenAddr.ReplaceAllString(s, "127.0.0.1:PORT")
	return goldenTempDir.ReplaceAllString(s, "DIR/")
}

// goldenFields are the JSON fields left out of a golden summary: when and
// where it ran, and (leafVolatile) what the host's timing decides.
var goldenFields = map[string]bool{
	"session.time": true, "session.run_id": true, "session.name": true, "session.host": true,
	"session.latscope": true, "session.target": true, "session.metrics_url": true,
}

// flatJSON lists a JSON document's leaves as sorted "path = value" lines,
// each array's elements under path[i]; keep says which paths to list.
func flatJSON(t *testing.T, doc string, keep func(path string) bool) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, doc)
	}
	var lines []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(strings.TrimPrefix(path+"."+k, "."), e)
			}
			if len(x) == 0 && keep(path) {
				lines = append(lines, path+" = {}")
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
			if len(x) == 0 && keep(path) {
				lines = append(lines, path+" = []")
			}
		default:
			if keep(path) && !goldenFields[path] {
				b, _ := json.Marshal(x)
				lines = append(lines, path+" = "+stable(string(b)))
			}
		}
	}
	walk("", v)
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

// timedKeep keeps, of a summary timed on the real clock, the session
// header, the request counts and which of the always-present sections
// there are.
func timedKeep(path string) bool {
	if strings.HasPrefix(path, "session.") {
		return true
	}
	// Not the ITL, TPOT or TTST counts: how the tokens came in chunks
	// depends on timing.
	return slices.Contains([]string{"requests.sent", "requests.ok", "requests.errors", "requests.warmup", "requests.tokens_out",
		"requests.cancelled_at_end", "ttft_basis", "ttft.count", "ttft_answer.count", "e2e.count"}, path)
}

// timedStderr keeps the lines stderr says before a timed run starts
// (what it measures, what it records), without status lines or notes the
// host's load decides.
func timedStderr(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "latscope demo:") || strings.HasPrefix(l, "latscope: target") || strings.HasPrefix(l, "latscope: recording") {
			out = append(out, stable(l))
		}
	}
	return strings.Join(out, "\n") + "\n"
}

func TestGoldenDemo(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "demo.lsr")
	stdout, stderr, err := execute(t, "demo", "--no-tui", "--json", "--profile", "tiny", "--seed", "7", "-n", "12", "-c", "3",
		"--prompt-tokens", "32", "--output-tokens", "8", "--no-gpu", "--record", rec)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, stderr)
	}
	checkGolden(t, "demo", flatJSON(t, stdout, timedKeep)+"-- stderr\n"+timedStderr(stderr))
	// The run's recording replays to the same counts.
	stdout, stderr, err = execute(t, "replay", rec, "--no-tui", "--json")
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, stderr)
	}
	checkGolden(t, "demo-replay", flatJSON(t, stdout, timedKeep))
}

func TestGoldenRun(t *testing.T) {
	url := serveTinySim(t)
	stdout, stderr, err := execute(t, "run", "--url", url, "--no-tui", "--json", "--seed", "11", "-n", "10", "-c", "2",
		"--prompt-tokens", "16", "--output-tokens", "4", "--no-gpu", "--scrape-interval", "100ms", "--slo", "ttft.p99<1h")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	checkGolden(t, "run", flatJSON(t, stdout, timedKeep)+"-- stderr\n"+timedStderr(stderr))
}

func everything(string) bool { return true }

// The replay of a recording with fixed times is the same summary whole,
// as JSON and as the table, and its objective is judged again.
func TestGoldenReplay(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "golden.lsr")
	goldenRecording(t, rec)
	stdout, stderr, err := execute(t, "replay", rec, "--no-tui", "--json")
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, stderr)
	}
	checkGolden(t, "replay-json", flatJSON(t, stdout, everything)+"-- stderr\n"+stable(stderr))
	stdout, stderr, err = execute(t, "replay", rec, "--no-tui")
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, stderr)
	}
	checkGolden(t, "replay-table", stable(stdout)+"-- stderr\n"+stable(stderr))
	stdout, stderr, err = execute(t, "report", rec, "--format", "json")
	if err != nil {
		t.Fatalf("report: %v\n%s", err, stderr)
	}
	checkGolden(t, "report-json", flatJSON(t, stdout, everything)+"-- stderr\n"+stable(stderr))
}

// attachKeep leaves out of attach's JSON what the connections measured on
// the real clock (clock offsets, round trips, when they connected).
func attachKeep(path string) bool {
	for _, v := range []string{"clock_", "rtt", "connected", "last_event", "since", "_at"} {
		if strings.Contains(path, v) {
			return false
		}
	}
	return true
}

// attach to two agents that serve fixed streams: the fleet's summary is the
// same whole, but for what the connections timed.
func TestGoldenAttach(t *testing.T) {
	fast, _ := recordedAgent(t, "fast", ttftSteps(40, 10, 0.5))
	slow, _ := recordedAgent(t, "slow", ttftSteps(20, 400, 4))
	stdout, stderr, err := execute(t, "attach", "--no-tui", "--json", fast.URL, slow.URL)
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, stderr)
	}
	checkGolden(t, "attach-json", flatJSON(t, stdout, attachKeep))
	stdout, stderr, err = execute(t, "attach", "--no-tui", fast.URL, slow.URL)
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, stderr)
	}
	checkGolden(t, "attach-table", attachTable(stdout))
}

// attachTable is attach's table without the lines of what its connections
// timed.
func attachTable(s string) string {
	lines := strings.Split(stable(s), "\n")
	lines = slices.DeleteFunc(lines, func(l string) bool {
		return strings.Contains(l, "clock") || strings.Contains(l, "rtt") || goldenClock.MatchString(l)
	})
	return strings.Join(lines, "\n")
}
