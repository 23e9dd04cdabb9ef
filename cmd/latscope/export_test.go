package main

import (
	"io"

	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestExportFailuresAreCountedInTheSummary: a collector that answers 500
// to every export costs spans, and the summary (table and --json) counts
// them with the collector's answer, besides the lines said as it happened.
func TestExportFailuresAreCountedInTheSummary(t *testing.T) {
	t.Parallel()
	var exports atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		exports.Add(1)
		http.Error(w, "collector is broken", http.StatusInternalServerError)
	}))
	t.Cleanup(collector.Close)
	url := serveTinySim(t)

	stdout, stderr, err := execute(t, "run", "--url", url, "-n", "6", "-c", "2", "--no-tui", "--json",
		"--otlp-export", collector.URL, "--flush-timeout", "2s")
	// Every span lost: the summary is printed, and the run exits 1.
	if code := exitCode(io.Discard, err, nil); code != exitFailure || !strings.Contains(err.Error(), "none of 6 requests' spans reached the collector") {
		t.Fatalf("run: exit %d (%v), want %d and the spans lost\n%s", code, err, exitFailure, stderr)
	}
	if exports.Load() == 0 {
		t.Fatal("no export reached the collector")
	}
	var got struct {
		Unexported *struct {
			Events int64  `json:"events"`
			Reason string `json:"reason"`
		} `json:"unexported"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("summary: %v\n%s", err, stdout)
	}
	if got.Unexported == nil || got.Unexported.Events == 0 {
		t.Fatalf("the summary does not count the spans the collector refused:\n%s", stdout)
	}
	if !strings.Contains(got.Unexported.Reason, "500") {
		t.Errorf("reason %q does not name the collector's answer", got.Unexported.Reason)
	}
	if !strings.Contains(stderr, "OTLP export to") || !strings.Contains(stderr, "failed") {
		t.Errorf("stderr does not say the export failed:\n%s", stderr)
	}
}
