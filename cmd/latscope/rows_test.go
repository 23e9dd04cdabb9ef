package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// report --format jsonl writes what export writes: one row per request.
func TestReportJSONLIsTheExport(t *testing.T) {
	t.Parallel()
	rec := filepath.Join(t.TempDir(), "rec.lsr")
	hostileRecording(t, rec)
	exported, _, err := execute(t, "export", rec)
	if err != nil {
		t.Fatalf("export: %v", err)
	}
	reported, _, err := execute(t, "report", rec, "--format", "jsonl")
	if err != nil {
		t.Fatalf("report --format jsonl: %v", err)
	}
	if n := strings.Count(exported, "\n"); n != 6 || reported != exported {
		t.Errorf("export wrote %d rows; report --format jsonl differs:\n%s\nvs\n%s", n, reported, exported)
	}
}
