package main

// latscope sweep against servers that fail it, and flags it has no use for.

import (
	"bytes"
	"context"
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
		if !errors.As(err, &ee) || ee.code != exitFailure {
			t.Fatalf("%s: err %v, want exit %d\nstderr:\n%s", format, err, exitFailure, stderr)
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

// notifyWriter is a stderr that calls onLine for each line written.
type notifyWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	part   []byte
	onLine func(string)
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	w.part = append(w.part, p...)
	for {
		i := bytes.IndexByte(w.part, '\n')
		if i < 0 {
			break
		}
		w.onLine(string(w.part[:i]))
		w.part = w.part[i+1:]
	}
	return len(p), nil
}

func (w *notifyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestSweepAgainstAServerKilledMidSweep: the server goes away once the
// first step is judged; the second step gets no success, the sweep stops
// there (no refinements against a dead port) and exits 1 naming the cause.
func TestSweepAgainstAServerKilledMidSweep(t *testing.T) {
	t.Parallel()
	h := tinySim(t)
	var afterKill atomic.Int64
	var killed atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if killed.Load() {
			afterKill.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	var once sync.Once
	kill := func() {
		killed.Store(true)
		_ = srv.Listener.Close() // new connections are refused
		srv.CloseClientConnections()
	}
	stderr := &notifyWriter{onLine: func(line string) {
		// Event-driven: the sweep says step 1 is judged.
		if strings.HasPrefix(line, "latscope sweep: step 1 ") {
			once.Do(kill)
		}
	}}
	var stdout bytes.Buffer
	root := newRootCmd()
	root.SetArgs(append([]string{"sweep", "--url", srv.URL, "--rates", "20,40,80", "--refine", "3"}, shortSweep...))
	root.SetOut(&stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(context.Background())

	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitFailure {
		t.Fatalf("err %v, want exit %d\nstderr:\n%s\nstdout:\n%s", err, exitFailure, stderr, stdout.String())
	}
	if want := "step 2 (40 req/s): no request succeeded: connection refused"; !strings.Contains(err.Error(), want) {
		t.Errorf("err %q, want it to say %q", err, want)
	}
	out := stdout.String()
	for _, want := range []string{"Sweep: open loop (rate, constant arrivals), 2 steps", "Failed: step 2 (40 req/s): no request succeeded: connection refused", "lower bound"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(stderr.String(), "step 3 ") {
		t.Errorf("a step ran against the dead server after step 2:\n%s", stderr)
	}
	if n := afterKill.Load(); n > 0 {
		t.Logf("%d requests reached the server as it was killed", n)
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
