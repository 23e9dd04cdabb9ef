package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latscope/latscope/internal/testutil"
)

func TestReportFormats(t *testing.T) {
	dir := t.TempDir()
	rec := testutil.TinyRecording(t, dir, "a.zst")

	stdout, _, err := execute(t, "report", rec)
	if err != nil || !strings.Contains(stdout, "# latscope report: a.zst") || !strings.Contains(stdout, "| ttft | 30 |") {
		t.Errorf("default report: %v\n%s", err, stdout)
	}

	stdout, _, err = execute(t, "report", rec, "--format", "json")
	var obj map[string]json.RawMessage
	if err != nil || json.Unmarshal([]byte(stdout), &obj) != nil || obj["ttft"] == nil || obj["report"] == nil {
		t.Errorf("--format json: %v\n%s", err, stdout)
	}

	// -o chooses the format by its extension unless --format says otherwise.
	out := filepath.Join(dir, "a.html")
	if _, _, err := execute(t, "report", rec, "-o", out); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(out); err != nil || !strings.HasPrefix(string(b), "<!DOCTYPE html>") {
		t.Errorf("-o a.html did not write HTML: %v", err)
	}
	out = filepath.Join(dir, "a.html.txt")
	if _, _, err := execute(t, "report", rec, "-o", out, "--format", "csv"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(out); !strings.HasPrefix(string(b), "section,name,statistic,value,unit,provenance\n") {
		t.Errorf("--format csv -o: %.80q", b)
	}
}

func TestReportCompare(t *testing.T) {
	dir := t.TempDir()
	a, b := testutil.TinyRecording(t, dir, "a.zst"), testutil.TinyRecording(t, dir, "b.zst")
	stdout, _, err := execute(t, "report", a, "--compare", b, "--format", "csv")
	if err != nil || !strings.HasPrefix(stdout, "section,name,statistic,unit,base,other,change,change_pct,p_value,significant") {
		t.Fatalf("--compare: %v\n%.200s", err, stdout)
	}
	if !strings.Contains(stdout, "latency,ttft,mean,ms,102.833,102.833,0,0,1,false,14,14") {
		t.Errorf("a run compared with itself should show no change:\n%s", stdout)
	}
}

func TestReportErrors(t *testing.T) {
	dir := t.TempDir()
	rec := testutil.TinyRecording(t, dir, "a.zst")
	notRec := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notRec, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"report", rec, "--format", "pdf"}, `--format: unknown format "pdf": want one of md, json, csv, html`},
		{[]string{"report", notRec}, "not a latscope recording"},
		{[]string{"report", rec, "--compare", notRec}, "not a latscope recording"},
		{[]string{"report", rec, "-o", rec}, "would overwrite the recording"},
		{[]string{"report"}, "accepts 1 arg"},
	} {
		_, _, err := execute(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
	if b, err := os.ReadFile(rec); err != nil || !strings.HasPrefix(string(b), "\x50\x2a\x4d\x18") {
		t.Error("the recording was damaged")
	}
}

func TestReportWarnsOfATornTail(t *testing.T) {
	dir := t.TempDir()
	rec := testutil.TinyRecording(t, dir, "a.zst")
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rec, b[:len(b)-5], 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := execute(t, "report", rec)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "latscope: warning: ") || !strings.Contains(stderr, "cut short at byte offset") {
		t.Errorf("stderr: %q", stderr)
	}
	if !strings.Contains(stdout, "> **Warning**:") {
		t.Errorf("the report does not carry the warning")
	}
}
