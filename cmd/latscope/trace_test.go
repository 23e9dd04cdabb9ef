package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRunWithTrace(t *testing.T) {
	url := serveTinySim(t)
	trace := writeFile(t, "trace.jsonl", `{"timestamp": 0, "prompt_tokens": 32, "output_tokens": 4}
{"timestamp": 0.1, "prompt_tokens": 64, "output_tokens": 8}
{"timestamp": 0.1, "prompt_tokens": 16, "output_tokens": 2}
{"timestamp": 0.2, "prompt_tokens": 200, "output_tokens": 3}
{"timestamp": 0.3, "prompt_tokens": 48, "output_tokens": 5}
`)
	stdout, stderr, err := execute(t, "run", "--url", url, "--no-tui", "--json", "--trace", trace, "--trace-speed", "2",
		"--no-gpu", "--no-metrics")
	if err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr)
	}
	var got struct {
		Requests struct{ Sent, OK, TokensOut int }
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	if got.Requests.Sent != 5 || got.Requests.OK != 5 {
		t.Errorf("requests %+v, want the trace's 5 sent and ok", got.Requests)
	}
}

func TestTraceFlagErrors(t *testing.T) {
	good := writeFile(t, "good.csv", "timestamp,prompt_tokens,output_tokens\n0,16,4\n")
	bad := writeFile(t, "bad.jsonl", "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [0]}\n{\"timestamp\": 5, \"input_length\": 10}\n")
	url := "http://127.0.0.1:1"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--trace", good, "-r", "5"}, "--trace is its own schedule: give --trace, or --rate or --steps, not both"},
		{[]string{"--trace", good, "--steps", "2,4"}, "--trace is its own schedule"},
		{[]string{"--trace", good, "--trace-speed", "0"}, "--trace-speed 0: want a positive factor"},
		{[]string{"--trace", good, "--prompt-file", good}, "give --trace or --prompt-file, not both"},
		{[]string{"--trace", bad}, "--trace: trace " + bad + ": line 2: output_length: missing"},
		{[]string{"--trace", filepath.Join(t.TempDir(), "none")}, "--trace: trace: open"},
	} {
		_, _, err := execute(t, append([]string{"run", "--url", url, "--no-tui"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("latscope run %s: err = %v, want it to mention %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}
