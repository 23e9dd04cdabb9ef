package main

// latscope sweep against servers that fail it, and flags it has no use for.

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// shortSweep are the flags that keep a test's sweep steps short.
var shortSweep = []string{"--no-tui", "--no-gpu", "--no-metrics", "--prompt-tokens", "16", "--output-tokens", "4",
	"--step-warmup", "200ms", "--steady-window", "500ms", "--step-max", "2s"}

// isCompletion reports whether r asks for a completion (what the steps
// send), as opposed to detection and the tokenizer.
func isCompletion(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "completions") }

// TestSweepAgainstAServerThatOnly429s: nothing succeeded, so the sweep
// exits 1 naming the cause, claims no max load or saturation, and shows
// "-" (null in JSON) for the latencies it did not measure.
func TestSweepAgainstAServerThatOnly429s(t *testing.T) {
	t.Parallel()
	h := tinySim(t)
	var completions atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isCompletion(r) {
			completions.Add(1)
			http.Error(w, `{"error":{"message":"rate limited"}}`, http.StatusTooManyRequests)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	for _, format := range []string{"table", "json"} {
		args := append([]string{"sweep", "--url", srv.URL, "--rates", "20,40"}, shortSweep...)
		if format == "json" {
			args = append(args, "--json")
		}
		stdout, stderr, err := execute(t, args...)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitAllFailed {
			t.Fatalf("%s: err %v, want exit %d\nstderr:\n%s", format, err, exitAllFailed, stderr)
		}
		if want := "step 1 (20 req/s): no request succeeded: "; !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "429") {
			t.Errorf("%s: err %q, want %q and the 429", format, err, want)
		}
		if format == "json" {
			var res struct {
				Steps []struct {
					TTFT   *json.RawMessage `json:"ttft"`
					Failed string           `json:"failed"`
				} `json:"steps"`
				MaxLoad    *json.RawMessage `json:"max_load"`
				Saturation *json.RawMessage `json:"saturation"`
				Failure    string           `json:"failure"`
			}
			if err := json.Unmarshal([]byte(stdout), &res); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, stdout)
			}
			if len(res.Steps) != 1 || res.Steps[0].TTFT != nil || res.Steps[0].Failed == "" || res.MaxLoad != nil || res.Saturation != nil || res.Failure == "" {
				t.Errorf("JSON %+v: want one failed step, ttft null, no max load or saturation, the failure\n%s", res, stdout)
			}
			continue
		}
		for _, want := range []string{"Failed: step 1 (20 req/s): no request succeeded", "Max load: none (no step had a successful request)",
			"Saturation: none (no step had a successful request)", "no success"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("table lacks %q:\n%s", want, stdout)
			}
		}
		if strings.Contains(stdout, "0.00") || strings.Contains(stdout, " 2 req/s") {
			t.Errorf("table shows unmeasured figures as 0.00, or a load it did not run:\n%s", stdout)
		}
		// One step only: nothing above or between is sent to such a server.
		if strings.Contains(stdout, "\n  2  ") {
			t.Errorf("the sweep went on after a step without a success:\n%s", stdout)
		}
	}
	if completions.Load() == 0 {
		t.Error("no completion reached the server")
	}
}

// TestSweepAgainstAServerKilledMidSweep: the server goes away at the first
// request of the second step (each step runs a runner of its own, whose id
// leads every X-Request-Id); that step gets no success, the sweep stops
// there (no refinements against a dead port) and exits 1 naming the cause.
func TestSweepAgainstAServerKilledMidSweep(t *testing.T) {
	t.Parallel()
	h := tinySim(t)
	var (
		mu       sync.Mutex
		firstRun string // the runner of step 1
		killed   bool
		srv      *httptest.Server
	)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isCompletion(r) {
			h.ServeHTTP(w, r)
			return
		}
		run := r.Header.Get("X-Request-Id")
		run = run[:max(strings.LastIndexByte(run, '-'), 0)] // ls-<run>-<seq>
		mu.Lock()
		if firstRun == "" {
			firstRun = run
		}
		if run != firstRun && !killed {
			killed = true
			_ = srv.Listener.Close() // from now on connections are refused
			srv.CloseClientConnections()
		}
		dead := killed
		mu.Unlock()
		if dead {
			panic(http.ErrAbortHandler) // a dead server does not answer
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	stdout, stderr, err := execute(t, append([]string{"sweep", "--url", srv.URL, "--rates", "5,10,20", "--refine", "3"}, shortSweep...)...)

	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitFailure {
		t.Fatalf("err %v, want exit %d\nstderr:\n%s\nstdout:\n%s", err, exitFailure, stderr, stdout)
	}
	if want := "step 2 (10 req/s): no request succeeded: connection refused"; !strings.Contains(err.Error(), want) {
		t.Errorf("err %q, want it to say %q", err, want)
	}
	for _, want := range []string{"Sweep: open loop (rate, constant arrivals), 2 steps", "Failed: step 2 (10 req/s): no request succeeded: connection refused",
		"Max load: 5 req/s (step 1)", "(10 req/s at step 2 had no successful request); a lower bound"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stderr, "step 3 ") {
		t.Errorf("a step ran against the dead server after step 2:\n%s", stderr)
	}
}

// TestSweepRefusesFlagsItDoesNotUse: run's load flags and bad step values
// are refused before anything connects, naming the flag to use.
func TestSweepRefusesFlagsItDoesNotUse(t *testing.T) {
	t.Parallel()
	var reached atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-c", "8"}, "sweep does not take --concurrency; use --streams 8 (closed-loop steps)"},
		{[]string{"--steps", "2,4"}, "sweep does not take --steps; use --streams 2,4"},
		{[]string{"--rate", "5"}, "sweep does not take --rate; use --rates 5"},
		{[]string{"-n", "100"}, "sweep does not take --requests; each step runs until it is steady, at most --step-max"},
		{[]string{"--duration", "1m"}, "sweep does not take --duration"},
		{[]string{"--warmup", "3"}, "sweep does not take --warmup; use --step-warmup"},
		{[]string{"--rates", "0,abc"}, `--rates: load "0": want a number above 0`},
		{[]string{"--rates", "4,2"}, "--rates: sweep plan: loads [4 2]: want them ascending"},
		{[]string{"--streams", "1.5"}, "--streams: sweep plan: concurrency 1.5: want a whole number"},
		{[]string{"--refine", "99"}, "--refine: sweep plan: refine 99"},
		{[]string{"--rate-factor", "1"}, "--rate-start/--rate-factor/--rate-max: sweep plan: factor 1"},
		{[]string{"--step-max", "1s", "--steady-window", "2s"}, "--step-max 1s: want at least --step-warmup + --steady-window"},
		{[]string{"--step-warmup", "0s"}, "--step-warmup 0s: want more than 0"},
		{[]string{"--stop-errors", "0"}, "--stop-errors 0: want a share above 0"},
		{[]string{"--rates", "2,4", "--rate-max", "64"}, "--rate-max applies to the default doubling rates; --rates lists the steps itself"},
		{[]string{"--streams", "1,2", "--arrival", "poisson"}, "--arrival applies to open-loop (rate) steps, not to --streams"},
	} {
		args := append([]string{"sweep", "--url", srv.URL, "--no-tui", "--no-gpu"}, tc.args...)
		_, _, err := execute(t, args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("sweep %s: err %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("%d requests reached the server: refused flags must be refused before connecting", n)
	}
	// Nor does sweep's help offer them.
	help, _, err := execute(t, "sweep", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--concurrency", "--steps", "--duration", "--requests", "--step-duration"} {
		if strings.Contains(help, flag+" ") {
			t.Errorf("sweep --help lists %s", flag)
		}
	}
}
