package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/session"
)

func TestRecordPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path string
		i    int
		want string
	}{
		{"a.lsr", 1, "a-1.lsr"},
		{"dir/run.lsr", 12, "dir/run-12.lsr"},
		{"noext", 2, "noext-2"},
		{"my.dir/noext", 3, "my.dir/noext-3"},
	} {
		if got := recordPath(tc.path, tc.i); got != tc.want {
			t.Errorf("recordPath(%q, %d) = %q, want %q", tc.path, tc.i, got, tc.want)
		}
	}
}

// fakeRuns is a once that prints run i's summary (TTFT p50 100+10i ms)
// and returns outcomes[i], counting the calls and the seeds it saw.
type fakeRuns struct {
	f        *loadFlags
	outcomes []error
	calls    int
	seeds    []int64
	records  []string
}

func (fr *fakeRuns) once(w io.Writer) error {
	i := fr.calls
	fr.calls++
	fr.seeds = append(fr.seeds, fr.f.seed.value())
	fr.records = append(fr.records, fr.f.record)
	p50 := 100 + 10*float64(i)
	s := aggregate.Summary{TTFT: aggregate.Stats{Count: 5, P50: p50, P99: 2 * p50}, TTFTAnswer: aggregate.Stats{Count: 5, P50: p50, P99: 2 * p50},
		Requests: aggregate.Requests{OK: 5, Sent: 5, ReqPerSec: 2, TokPerSec: 100}}
	if err := aggregate.WriteJSON(w, s); err != nil {
		return err
	}
	if i < len(fr.outcomes) {
		return fr.outcomes[i]
	}
	return nil
}

func TestRepeaterRunsAndReports(t *testing.T) {
	t.Parallel()
	f := &loadFlags{record: "out.lsr"}
	fr := &fakeRuns{f: f}
	r := repeater{f: f, n: 3, record: f.record}
	var stderr bytes.Buffer
	if err := r.runAll(context.Background(), &stderr, fr.once); err != nil {
		t.Fatal(err)
	}
	if fr.calls != 3 || len(r.summaries) != 3 {
		t.Fatalf("%d runs, %d summaries", fr.calls, len(r.summaries))
	}
	if fr.seeds[0] == fr.seeds[1] && fr.seeds[1] == fr.seeds[2] {
		t.Errorf("without --seed each run draws its own seed: %v", fr.seeds)
	}
	if strings.Join(fr.records, " ") != "out-1.lsr out-2.lsr out-3.lsr" {
		t.Errorf("recordings %v", fr.records)
	}
	var out bytes.Buffer
	if err := r.write(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"run 1: TTFT p50 100.0 ms", "run 3: TTFT p50 120.0 ms", "TTFT p50", "85.16 – 134.8 ms"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	// As JSON: the runs' own summaries and the statistics.
	r.jsonOut = true
	out.Reset()
	if err := r.write(&out); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Runs     []aggregate.Summary `json:"runs"`
		Repeated struct {
			Headline []struct {
				Name   string    `json:"name"`
				Values []float64 `json:"values"`
				Low    *float64  `json:"ci95_low"`
			} `json:"headline"`
		} `json:"repeated"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(doc.Runs) != 3 || doc.Runs[2].TTFT.P50 != 120 || doc.Repeated.Headline[0].Name != "ttft_p50_ms" ||
		len(doc.Repeated.Headline[0].Values) != 3 || doc.Repeated.Headline[0].Low == nil {
		t.Errorf("JSON:\n%s", out.String())
	}
}

func TestRepeaterKeepsAGivenSeed(t *testing.T) {
	t.Parallel()
	f := &loadFlags{}
	if err := f.seed.Set("42"); err != nil {
		t.Fatal(err)
	}
	fr := &fakeRuns{f: f}
	r := repeater{f: f, n: 3, seedGiven: true}
	if err := r.runAll(context.Background(), io.Discard, fr.once); err != nil {
		t.Fatal(err)
	}
	for _, s := range fr.seeds {
		if s != 42 {
			t.Errorf("--seed 42: a run used %v", fr.seeds)
		}
	}
}

func TestRepeaterOutcomes(t *testing.T) {
	t.Parallel()
	slo := session.Exit(session.SLOMissed, errors.New("1 of 1 objectives missed"))
	for _, tc := range []struct {
		name     string
		outcomes []error
		calls    int // runs started
		kept     int // summaries kept
		code     int // exit code, 0 for none
	}{
		{"an objective missed: the runs go on, exit 2", []error{nil, slo, nil}, 3, 3, exitSLOMissed},
		{"interrupted: stop, that run left out", []error{nil, session.Exit(session.Interrupted, errors.New("interrupted"))}, 2, 1, exitInterrupted},
		{"all failed: stop, that run kept", []error{session.Exit(session.AllFailed, errors.New("all 5 requests failed"))}, 1, 1, exitAllFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &loadFlags{}
			fr := &fakeRuns{f: f, outcomes: tc.outcomes}
			r := repeater{f: f, n: 3}
			err := r.runAll(context.Background(), io.Discard, fr.once)
			code := 0
			if err != nil {
				code = codeOf(err)
			}
			if fr.calls != tc.calls || len(r.summaries) != tc.kept || code != tc.code {
				t.Errorf("calls %d, kept %d, code %d (%v); want %d, %d, %d", fr.calls, len(r.summaries), code, err, tc.calls, tc.kept, tc.code)
			}
		})
	}
	// A context already ended starts no run.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := &loadFlags{}
	fr := &fakeRuns{f: f}
	r := repeater{f: f, n: 3}
	if err := r.runAll(ctx, io.Discard, fr.once); codeOf(err) != exitInterrupted || fr.calls != 0 {
		t.Errorf("cancelled: %v after %d runs", err, fr.calls)
	}
}

func TestRepeatFlagBounds(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"0", "-1", "1001"} {
		if _, _, err := execute(t, "demo", "--no-tui", "--repeat", n); err == nil || !strings.Contains(err.Error(), "--repeat") {
			t.Errorf("--repeat %s: %v", n, err)
		}
	}
}

func TestRepeatRecordPathsCheckedFirst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a-2.lsr"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := execute(t, "run", "--url", "http://127.0.0.1:1", "--no-tui", "--repeat", "3", "--record", filepath.Join(dir, "a.lsr"))
	if err == nil || !strings.Contains(err.Error(), "run 2 of 3") {
		t.Errorf("an existing a-2.lsr: %v, want refused before any run", err)
	}
	// A run that cannot start prints no summary, and no empty statistics.
	stdout, _, err := execute(t, "run", "--url", "http://127.0.0.1:1", "--no-tui", "--repeat", "3", "--json", "--timeout", "1s")
	if err == nil || !strings.Contains(err.Error(), "run 1 of 3") || stdout != "" {
		t.Errorf("an unreachable server: %v, stdout %q", err, stdout)
	}
}

func TestRunRepeatAgainstSimulator(t *testing.T) {
	url := serveTinySim(t)
	dir := t.TempDir()
	args := []string{"run", "--url", url, "--no-tui", "-n", "8", "-c", "4", "--prompt-tokens", "64", "--output-tokens", "16",
		"--no-gpu", "--no-metrics", "--repeat", "3"}
	stdout, stderr, err := execute(t, append(args, "--json", "--record", filepath.Join(dir, "r.lsr"))...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var doc struct {
		Runs     []aggregate.Summary `json:"runs"`
		Repeated struct {
			Headline []aggregate.RepeatedQuantity `json:"headline"`
		} `json:"repeated"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if len(doc.Runs) != 3 || len(doc.Repeated.Headline) != 9 {
		t.Fatalf("%d runs, %d headline quantities:\n%s", len(doc.Runs), len(doc.Repeated.Headline), stdout)
	}
	seeds := map[int64]bool{}
	for _, s := range doc.Runs {
		if s.Requests.OK != 8 || s.Session == nil {
			t.Fatalf("a run: %+v", s.Requests)
		}
		seeds[s.Session.Load.Seed] = true
	}
	if len(seeds) != 3 {
		t.Errorf("each run draws its own seed: %v", seeds)
	}
	for i := 1; i <= 3; i++ {
		if _, err := os.Stat(recordPath(filepath.Join(dir, "r.lsr"), i)); err != nil {
			t.Errorf("run %d's recording: %v", i, err)
		}
	}

	// Compared with itself, nothing changed.
	a := filepath.Join(dir, "a.json")
	if err := os.WriteFile(a, []byte(stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := execute(t, "compare", a, a)
	if err != nil || !strings.Contains(out, "Result: no significant change.") {
		t.Errorf("compare with itself: %v\n%s\n%s", err, out, stderr)
	}

	// --compare runs the benchmark again and tests it against a.json.
	out, stderr, err = execute(t, append(args, "--compare", a)...)
	if err != nil || !strings.Contains(out, "base mean (runs)") || !strings.Contains(out, "Result: ") {
		t.Errorf("--repeat 3 --compare a.json: %v\n%s\n%s", err, out, stderr)
	}
	if _, _, err := execute(t, "run", "--url", url, "--no-tui", "--compare", a); err == nil || !strings.Contains(err.Error(), "--compare needs --repeat") {
		t.Errorf("--compare without --repeat: %v", err)
	}
}

func TestCompareRefusesASingleRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	single := filepath.Join(dir, "one.json")
	var b bytes.Buffer
	if err := aggregate.WriteJSON(&b, aggregate.Summary{}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(single, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := execute(t, "compare", single, single); !errors.Is(err, aggregate.ErrNotRepeated) || !strings.Contains(err.Error(), "one.json") {
		t.Errorf("a single run's JSON: %v", err)
	}
	if _, _, err := execute(t, "compare", filepath.Join(dir, "missing.json"), single); err == nil {
		t.Error("a missing file: no error")
	}
	if _, _, err := execute(t, "compare", dir, single); err == nil {
		t.Error("a directory: no error")
	}
}
