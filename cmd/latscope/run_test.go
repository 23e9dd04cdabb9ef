package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/latscope/latscope/internal/testutil"
	"github.com/latscope/latscope/internal/textsafe"
	"github.com/latscope/latscope/sim"
	"github.com/latscope/latscope/sim/simtest"
)

// execute runs the latscope command line in-process and returns stdout,
// stderr and the error main would map to an exit code.
func execute(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	return executeCtx(t, context.Background(), args...)
}

// executeCtx is execute with a context the test can cancel (Ctrl-C).
func executeCtx(t *testing.T, ctx context.Context, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr testutil.SyncBuffer
	root := newRootCmd()
	root.SetArgs(args)
	// As main does: what is written is escaped for the terminal.
	out, errOut := textsafe.NewShared(&stdout), textsafe.NewShared(&stderr)
	root.SetOut(out)
	root.SetErr(errOut)
	err := root.ExecuteContext(ctx)
	_, _ = out.Flush(), errOut.Flush()
	return stdout.String(), stderr.String(), err
}

// serveTinySim runs the simulator's fast profile on a loopback port.
func serveTinySim(t *testing.T) string {
	t.Helper()
	return serveTinySimWith(t, sim.Config{MaxNumSeqs: 4})
}

// serveTinySimWith runs the simulator's fast profile with cfg's modes.
func serveTinySimWith(t *testing.T, cfg sim.Config) string {
	t.Helper()
	return simtest.ServeTiny(t, cfg)
}

func TestRunJSONAgainstSimulator(t *testing.T) {
	url := serveTinySim(t)
	stdout, stderr, err := execute(t, "run", "--url", url, "--no-tui", "--json", "-n", "24", "-c", "6",
		"--prompt-tokens", "64", "--output-tokens", "16", "--scrape-interval", "100ms", "--no-gpu")
	if err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	for _, key := range []string{"requests", "ttft", "itl", "tpot", "e2e", "stages", "server", "breakdown"} {
		if _, ok := got[key]; !ok {
			t.Errorf("JSON lacks %q", key)
		}
	}
	var req struct{ Sent, OK, Errors int }
	if err := json.Unmarshal(got["requests"], &req); err != nil {
		t.Fatal(err)
	}
	if req.Sent != 24 || req.OK != 24 || req.Errors != 0 {
		t.Errorf("requests %+v, want 24 sent and ok", req)
	}
	if !strings.Contains(stderr, "dialect openai-chat") {
		t.Errorf("stderr does not say which dialect was detected:\n%s", stderr)
	}
}

func TestRunSLOFailureExitsTwo(t *testing.T) {
	url := serveTinySim(t)
	_, stderr, err := execute(t, "run", "--url", url, "--no-tui", "-n", "4", "--prompt-tokens", "16", "--output-tokens", "4",
		"--no-gpu", "--no-metrics", "--slo", "ttft.p99<1us")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 2 {
		t.Fatalf("err = %v, want an exit code 2 for a missed objective", err)
	}
	if !strings.Contains(stderr, "slo FAIL ttft.p99") {
		t.Errorf("stderr does not name the missed objective:\n%s", stderr)
	}
}

func TestRunBadInput(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "--url is required"},
		{[]string{"run", "--url", "http://127.0.0.1:1", "-c", "0"}, "--concurrency 0"},
		{[]string{"run", "--url", "http://127.0.0.1:1", "--prompt-tokens", "abc"}, `invalid token length "abc"`},
		{[]string{"run", "--url", "http://127.0.0.1:1", "--slo", "ttft.p99<"}, "invalid SLO"},
		{[]string{"run", "--url", "http://127.0.0.1:1", "--header", "nocolon"}, `--header number 1: want "Name: value"`},
		{[]string{"run", "--url", "http://127.0.0.1:1", "--gpu", "x"}, "--gpu"},
		{[]string{"run", "--url", "http://127.0.0.1:1", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"run", "--url", "http://127.0.0.1:1", "--no-tui", "-n", "1", "--no-gpu"}, "GET /v1/models: connection refused by 127.0.0.1:1"},
		{[]string{"demo", "--profile", "nope"}, "--profile"},
		{[]string{"run", "--url", "http://127.0.0.1:1", "-r", "NaN"}, "--rate NaN: want a number of requests per second"},
		{[]string{"run", "--url", "http://127.0.0.1:1", "-r", "+Inf"}, "--rate +Inf"},
		{[]string{"run", "--url", "http://127.0.0.1:1", "-r", "5", "--arrival", "gamma", "--burstiness", "0"}, "--burstiness 0: want a positive number"},
		{[]string{"run", "--url", "http://127.0.0.1:1", "-r", "5", "--burstiness", "2"}, "--burstiness 2: applies to --arrival gamma only"},
		{[]string{"run", "--url", "http://127.0.0.1:1", "-r", "5", "--arrival", "weibull"}, `--arrival "weibull"`},
		{[]string{"run", "--url", "http://127.0.0.1:1", "--otlp-join-wait", "-1s"}, "--otlp-join-wait -1s: want 0 or more"},
		{[]string{"run", "--url", "http://127.0.0.1:1", "--max-event-bytes", "9223372036854775807"}, "--max-event-bytes 9223372036854775807: want 1 to 1073741824"},
		{[]string{"run", "--url", "http://127.0.0.1:1", "--max-event-bytes", "0"}, "--max-event-bytes 0"},
		{[]string{"run", "--url", "http://127.0.0.1:1", "--timeout", "-1s"}, "--timeout -1s"},
		{[]string{"run", "--url", "http://127.0.0.1:1", "--scrape-interval", "0s"}, "--scrape-interval 0s"},
		{[]string{"run", "--url", "http://127.0.0.1:1", "--shared-prefix", "-3"}, "--shared-prefix -3"},
		{[]string{"run", "--url", "http://127.0.0.1:1", "--ca-cert", "x.pem", "--insecure"}, "--ca-cert and --insecure: give one or the other"},
		{[]string{"run", "--url", "http://127.0.0.1:1", "--ca-cert", "/nonexistent/ca.pem"}, "--ca-cert /nonexistent/ca.pem: no such file"},
		{[]string{"run", "--url", "ftp://host"}, `--url: URL ftp://host: want http:// or https://, not "ftp:"`},
		{[]string{"run", "--url", "http://127.0.0.1:1", "--header", "X-Api-Key: a\x01b"}, "--header number 1: header X-Api-Key: its value holds a control character"},
		{[]string{"run", "--url", "http://127.0.0.1:1", "--prompt-file", "/nonexistent/prompts.txt", "--dialect", "tgi"}, "--prompt-file /nonexistent/prompts.txt: no such file"},
	}
	for _, tc := range tests {
		_, _, err := execute(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("latscope %s: err = %v, want it to mention %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

func TestDemoIsLabelledSimulated(t *testing.T) {
	t.Parallel()
	stdout, stderr, err := execute(t, "demo", "--profile", "tiny", "--duration", "1500ms", "--concurrency", "4")
	if err != nil {
		t.Fatalf("demo: %v\nstderr:\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "SIMULATED") {
		t.Errorf("demo's stderr does not say the server is simulated:\n%s", stderr)
	}
	if !strings.Contains(stdout, "(simulated)") {
		t.Errorf("demo's report does not label the GPU simulated:\n%s", stdout)
	}
	if !strings.Contains(stdout, "TTFT breakdown") || !strings.Contains(stdout, "server") {
		t.Errorf("demo's report lacks the breakdown with server-reported stages:\n%s", stdout)
	}
}

// runSeed runs a short run against url and returns the seed its JSON
// summary's session header reports, and whether it was drawn.
func runSeed(t *testing.T, url string, extra ...string) (seed int64, drawn bool, stderr string) {
	t.Helper()
	args := append([]string{"run", "--url", url, "--no-tui", "--json", "-n", "2", "--prompt-tokens", "16",
		"--output-tokens", "2", "--no-gpu", "--no-metrics"}, extra...)
	stdout, stderr, err := execute(t, args...)
	if err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr)
	}
	var got struct {
		Session struct {
			Load struct {
				Seed      int64 `json:"seed"`
				SeedDrawn bool  `json:"seed_drawn"`
			} `json:"load"`
		} `json:"session"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	return got.Session.Load.Seed, got.Session.Load.SeedDrawn, stderr
}

func TestRunSeedIsDrawnAndReported(t *testing.T) {
	t.Parallel()
	url := serveTinySim(t)
	first, drawn, stderr := runSeed(t, url)
	if !drawn || first == 0 {
		t.Fatalf("without --seed: seed %d, drawn %t; want a drawn seed", first, drawn)
	}
	if want := fmt.Sprintf("--seed %d repeats them", first); !strings.Contains(stderr, want) {
		t.Errorf("stderr does not say how to repeat the run (%q):\n%s", want, stderr)
	}
	if second, _, _ := runSeed(t, url); second == first {
		t.Errorf("two runs without --seed both used seed %d", first)
	}
	if seed, drawn, stderr := runSeed(t, url, "--seed", "7"); seed != 7 || drawn || strings.Contains(stderr, "drawn") {
		t.Errorf("--seed 7: seed %d, drawn %t; want 7, given", seed, drawn)
	}
	if _, _, err := execute(t, "run", "--url", url, "--seed", "x"); err == nil || !strings.Contains(err.Error(), "--seed") {
		t.Errorf("--seed x: err = %v, want it refused", err)
	}
}

// TestRunEndCancelsAreNotErrors: requests the run's own end cancels are
// counted apart from the errors; a run in which they were all there was
// measured nothing: not a success (exit 3), and not a failure of the
// server either (the line says to give the requests time), and its
// duration is the run's, not 0 s.
func TestRunEndCancelsAreNotErrors(t *testing.T) {
	t.Parallel()
	url := serveTinySim(t)
	// 2000 tokens take the simulator seconds: none finishes in 300 ms.
	stdout, stderr, err := execute(t, "run", "--url", url, "--no-tui", "--json", "-c", "2", "-d", "300ms", "--drain", "0s",
		"--prompt-tokens", "16", "--output-tokens", "2000", "--no-gpu", "--no-metrics")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitAllFailed || !strings.Contains(err.Error(), "no request finished within the run: all 2 were cancelled at its end; lengthen --duration or --drain") {
		t.Fatalf("err = %v, want exit %d: nothing finished\nstderr:\n%s", err, exitAllFailed, stderr)
	}
	var got struct {
		Requests struct {
			Sent, OK, Errors int
			CancelledAtEnd   int     `json:"cancelled_at_end"`
			Duration         float64 `json:"duration_s"`
		} `json:"requests"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	if r := got.Requests; r.Sent != 2 || r.OK != 0 || r.Errors != 0 || r.CancelledAtEnd != 2 {
		t.Errorf("requests %+v, want 2 sent, both cancelled at the end, no error", r)
	}
	// The duration runs from the first request's start (a busy host may
	// start it late) to the last cancellation, the run's end: not 0 s.
	if d := got.Requests.Duration; d <= 0 {
		t.Errorf("duration %v s, want the time from the first request to the run's end", d)
	}
}

// runCached runs a short run against url and returns its JSON summary's
// prompt_cached count, its ok count and its insights.
func runCached(t *testing.T, url string, extra ...string) (cached, ok int, insights []string) {
	t.Helper()
	args := append([]string{"run", "--url", url, "--no-tui", "--json", "-n", "16", "-c", "2", "--prompt-tokens", "128",
		"--output-tokens", "4", "--no-gpu", "--no-metrics"}, extra...)
	stdout, stderr, err := execute(t, args...)
	if err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr)
	}
	var got struct {
		Requests struct {
			OK    int            `json:"ok"`
			Flags map[string]int `json:"flags"`
		} `json:"requests"`
		Insights []struct {
			Message string `json:"message"`
		} `json:"insights"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	for _, in := range got.Insights {
		insights = append(insights, in.Message)
	}
	return got.Requests.Flags["prompt_cached"], got.Requests.OK, insights
}

// TestRepeatedRunAndThePromptCache: against a server with a prefix cache,
// a second run with the same --seed sends the same prompts, which the cache
// serves: every request is flagged prompt_cached and an insight says so.
// By default each run draws its own seed, and a second run finds nothing
// of the first in the cache.
func TestRepeatedRunAndThePromptCache(t *testing.T) {
	const insight = "of requests were served largely from the server's prompt cache"
	hasInsight := func(ins []string) bool {
		return slices.ContainsFunc(ins, func(m string) bool { return strings.Contains(m, insight) })
	}

	url := serveTinySimWith(t, sim.Config{MaxNumSeqs: 4, PrefixCacheBlocks: 1024})
	if cached, ok, _ := runCached(t, url, "--seed", "5"); ok != 16 || cached != 0 {
		t.Fatalf("first run with --seed 5: %d ok, %d flagged prompt_cached; want 16 and none (its prompts differ from the first token)", ok, cached)
	}
	cached, ok, ins := runCached(t, url, "--seed", "5")
	if ok != 16 || cached != 16 || !hasInsight(ins) {
		t.Errorf("the same run again: %d ok, %d flagged prompt_cached, insights %q; want all 16 flagged and the insight", ok, cached, ins)
	}

	url = serveTinySimWith(t, sim.Config{MaxNumSeqs: 4, PrefixCacheBlocks: 1024})
	runCached(t, url)
	if cached, ok, ins := runCached(t, url); ok != 16 || cached != 0 || hasInsight(ins) {
		t.Errorf("a second run with a drawn seed: %d ok, %d flagged prompt_cached, insights %q; want none flagged", ok, cached, ins)
	}
}
