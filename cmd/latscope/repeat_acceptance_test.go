//go:build acceptance

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latscope/latscope/aggregate"
)

// TestDemoRepeatShowsAnIntervalPerFigure runs the demo three times, for
// real: the table has each run's headline and a 95% interval for every
// headline figure.
func TestDemoRepeatShowsAnIntervalPerFigure(t *testing.T) {
	stdout, stderr, err := execute(t, "demo", "--repeat", "3", "-d", "3s", "--no-tui", "--profile", "tiny", "-c", "4")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for i := 1; i <= 3; i++ {
		if !strings.Contains(stdout, fmt.Sprintf("run %d: TTFT p50 ", i)) {
			t.Errorf("no headline for run %d:\n%s", i, stdout)
		}
	}
	for _, label := range []string{"TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "E2E p50", "E2E p99", "output tok/s", "req/s", "error rate"} {
		row := lineStarting(stdout, "  "+label+" ")
		if row == "" || !strings.Contains(row, " – ") || !strings.HasSuffix(strings.TrimSpace(row), " 3") {
			t.Errorf("%s: no interval over 3 runs in %q\n%s", label, row, stdout)
		}
	}
	if got := strings.Count(stderr, "drawn for this run"); got != 3 {
		t.Errorf("%d seeds drawn, want one per run:\n%s", got, stderr)
	}
}

func lineStarting(text, prefix string) string {
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}

// TestCompareOfOneConfigurationSaysNoChange measures one configuration 8
// times and compares its odd runs with its even ones (interleaved, so a
// neighbour on the host that slows a stretch of the test slows both sets
// alike). The comparison promises a false alarm in at most 5% of such
// pairs; one false alarm is met by one fresh pair, so the test fails by
// chance in about 0.25% of its runs, not 5%.
func TestCompareOfOneConfigurationSaysNoChange(t *testing.T) {
	var last string
	for attempt := 1; attempt <= 2; attempt++ {
		out := compareOddWithEven(t)
		if strings.Contains(out, "Result: no significant change.") {
			return
		}
		t.Logf("attempt %d: a change in one configuration (the 5%% the test allows):\n%s", attempt, out)
		last = out
	}
	t.Errorf("two false alarms in a row comparing one configuration with itself:\n%s", last)
}

func compareOddWithEven(t *testing.T) string {
	t.Helper()
	stdout, stderr, err := execute(t, "demo", "--repeat", "8", "-d", "2s", "--no-tui", "--profile", "tiny", "-c", "4", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var doc struct {
		Runs []json.RawMessage `json:"runs"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || len(doc.Runs) != 8 {
		t.Fatalf("%d runs, %v\n%s", len(doc.Runs), err, stdout)
	}
	dir := t.TempDir()
	var paths []string
	for half := range 2 {
		var raws []json.RawMessage
		var runs []aggregate.Summary
		for i := half; i < len(doc.Runs); i += 2 {
			var s aggregate.Summary
			if err := json.Unmarshal(doc.Runs[i], &s); err != nil {
				t.Fatal(err)
			}
			raws, runs = append(raws, doc.Runs[i]), append(runs, s)
		}
		var b bytes.Buffer
		if err := aggregate.WriteRepeatedJSON(&b, raws, aggregate.Repeat(runs)); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, []string{"odd.json", "even.json"}[half])
		if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	out, stderr, err := execute(t, "compare", paths[0], paths[1])
	if err != nil {
		t.Fatalf("compare: %v\n%s", err, stderr)
	}
	return out
}
