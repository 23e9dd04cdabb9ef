package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latscope/latscope/aggregate"
)

// TestRepeatOnceKeepsAGivenSeed: with --seed every run of a --repeat uses
// it; without, each draws its own.
func TestRepeatOnceKeepsAGivenSeed(t *testing.T) {
	t.Parallel()
	for _, given := range []bool{true, false} {
		f := &loadFlags{}
		if given {
			if err := f.seed.Set("42"); err != nil {
				t.Fatal(err)
			}
		}
		var seeds []int64
		once := repeatOnce(newRootCmd(), f, func() error { seeds = append(seeds, f.seed.Value()); return nil })
		for range 3 {
			if err := once(io.Discard, "r.lsr"); err != nil {
				t.Fatal(err)
			}
		}
		if f.record != "r.lsr" || !f.jsonOut {
			t.Errorf("a run records to %q, JSON %v", f.record, f.jsonOut)
		}
		same := seeds[0] == seeds[1] && seeds[1] == seeds[2]
		if given && (!same || seeds[0] != 42) || !given && same {
			t.Errorf("--seed given %v: seeds %v", given, seeds)
		}
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
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("r-%d.lsr", i))); err != nil {
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
