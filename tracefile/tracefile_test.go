package tracefile

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/recorder"
)

// req is a trace request, as a trace's line gives it.
func req(at time.Duration, prompt, output int, hashIDs []uint64) probe.TraceRequest {
	return probe.TraceRequest{At: at, PromptTokens: prompt, OutputTokens: output, HashIDs: hashIDs}
}

func TestReadFormats(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tests := []struct {
		file   string
		format string
		want   []probe.TraceRequest
	}{
		{"azure_sample.csv", Azure, []probe.TraceRequest{
			req(0, 374, 44, nil),
			req(4314579*time.Microsecond, 396, 109, nil),
			req(4332397*time.Microsecond, 879, 4, nil),
			req(4623925*time.Microsecond, 91, 29, nil),
			req(5424047*time.Microsecond, 1942, 1, nil), // no output asks for one token
			req(6099842*time.Microsecond, 1457, 231, nil),
		}},
		{"mooncake_sample.jsonl", Mooncake, []probe.TraceRequest{
			req(0, 1300, 12, []uint64{0, 1, 2}),
			req(0, 1100, 20, []uint64{0, 1, 3}),
			req(1730*ms, 600, 8, []uint64{4, 5}),
			req(3021*ms, 1536, 31, []uint64{0, 1, 6}),
			req(4999*ms, 200, 1, []uint64{7}),
		}},
		{"latscope_sample.jsonl", JSONL, []probe.TraceRequest{
			req(0, 2048, 256, nil),
			req(500*ms, 512, 128, nil),
			req(750*ms, 64, 16, nil),
		}},
		{"latscope_sample.csv", CSV, []probe.TraceRequest{
			req(0, 512, 128, nil),
			req(20*ms, 1024, 64, nil),
			req(20*ms, 32, 8, nil),
			req(1500*ms, 256, 256, nil),
		}},
	}
	for _, tt := range tests {
		tr, err := Read(filepath.Join("testdata", tt.file))
		if err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		if tr.Format != tt.format || len(tr.Requests) != len(tt.want) {
			t.Fatalf("%s: format %s, %d requests; want %s, %d", tt.file, tr.Format, len(tr.Requests), tt.format, len(tt.want))
		}
		if wantBlock := tt.format == Mooncake; (tr.BlockTokens == MooncakeBlockTokens) != wantBlock {
			t.Errorf("%s: %d tokens per hash id", tt.file, tr.BlockTokens)
		}
		for i, r := range tr.Requests {
			w := tt.want[i]
			if r.At != w.At || r.PromptTokens != w.PromptTokens || r.OutputTokens != w.OutputTokens || len(r.HashIDs) != len(w.HashIDs) {
				t.Errorf("%s request %d: %+v, want %+v", tt.file, i, r, w)
			}
		}
	}
}

func TestReadNamesTheBadLine(t *testing.T) {
	t.Parallel()
	for file, want := range map[string]string{
		"malformed_mooncake.jsonl": "malformed_mooncake.jsonl: line 3: not a Mooncake trace line",
		"malformed_azure.csv":      "malformed_azure.csv: line 3: want 3 comma-separated fields",
	} {
		_, err := Read(filepath.Join("testdata", file))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one with %q", file, err, want)
		}
	}
	for text, want := range map[string]string{
		"":        "no requests",
		"hello\n": "line 1: not a trace",
		"timestamp,prompt_tokens,output_tokens\n":                                      "no requests",
		"timestamp,prompt_tokens,output_tokens\n0,0,1\n":                               "line 2: prompt_tokens 0: want 1 to",
		"{\"timestamp\":1,\"prompt_tokens\":5}\n":                                      "line 1: output_tokens: missing",
		"\n\n{\"timestamp\":\"soon\",\"prompt_tokens\":5,\"output_tokens\":1}\n":       "line 3: timestamp \"soon\"",
		"{\"timestamp\":1,\"input_length\":5,\"output_length\":1,\"hash_ids\":[-1]}\n": "line 1: hash_ids[0] -1",
		"{\"timestamp\":1e300,\"prompt_tokens\":5,\"output_tokens\":1}\n":              "line 1: timestamp 1e+300: out of range",
	} {
		_, err := Parse(strings.NewReader(text))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one with %q", text, err, want)
		}
	}
	if _, err := Read(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Errorf("a missing file read as a trace")
	}
}

func TestReadRecording(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "run.lsr")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w, err := recorder.Create(path, &event.Session{Time: t0, Latscope: "test", Target: "http://127.0.0.1:1"}, recorder.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Records arrive as requests finish, not in the order they were sent.
	for _, r := range []*event.Request{
		{ID: "b", Intended: t0.Add(300 * time.Millisecond), Start: t0.Add(301 * time.Millisecond), PromptTokens: 40, TargetOutputTokens: 7, OutputTokens: 7, Outcome: event.OutcomeOK},
		{ID: "w", Warmup: true, Intended: t0, Start: t0, PromptTokens: 9, TargetOutputTokens: 9, Outcome: event.OutcomeOK},
		{ID: "a", Intended: t0.Add(100 * time.Millisecond), Start: t0.Add(100 * time.Millisecond), PromptTokens: 512, TargetOutputTokens: 64, OutputTokens: 12, Outcome: event.OutcomeTimeout},
	} {
		if err := w.Write(event.NewRequest(r)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	tr, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []probe.TraceRequest{req(0, 512, 64, nil), req(200*time.Millisecond, 40, 7, nil)}
	if tr.Format != Recording || len(tr.Requests) != 2 || tr.Requests[0].At != want[0].At || tr.Requests[1].At != want[1].At ||
		tr.Requests[0].PromptTokens != 512 || tr.Requests[0].OutputTokens != 64 || tr.Requests[1].OutputTokens != 7 {
		t.Fatalf("trace %+v, want %+v", tr, want)
	}
}

func FuzzTraceLine(f *testing.F) {
	for _, s := range []string{
		`{"timestamp": 0, "input_length": 1300, "output_length": 12, "hash_ids": [0, 1, 2]}`,
		`{"timestamp": 12.5, "prompt_tokens": 512, "output_tokens": 128}`,
		`{"timestamp": "2026-01-02T03:04:05Z", "prompt_tokens": 5, "output_tokens": 1}`,
		`2023-11-16 18:15:46.6805900,374,44`,
		`0.020,1024,64`,
		`"1",2,3`,
		`{"timestamp": 1e308, "input_length": 1}`,
	} {
		f.Add(s)
	}
	parsers := []func([]byte) (probe.TraceRequest, error){parseJSONLine, parseMooncakeLine, parseAzureLine, parseCSVLine}
	f.Fuzz(func(t *testing.T, line string) {
		for _, parse := range parsers {
			r, err := parse([]byte(line))
			if err != nil {
				continue
			}
			if r.PromptTokens < 1 || r.PromptTokens > probe.MaxTraceTokens || r.OutputTokens < 1 || r.OutputTokens > probe.MaxTraceTokens {
				t.Fatalf("%q parsed to impossible lengths %+v", line, r)
			}
		}
		// A whole trace of the line, as the first line and after a header.
		for _, text := range []string{line, "timestamp,prompt_tokens,output_tokens\n" + line, "TIMESTAMP,ContextTokens,GeneratedTokens\n" + line} {
			tr, err := Parse(strings.NewReader(text))
			if err != nil {
				continue
			}
			for _, r := range tr.Requests {
				if r.At < 0 {
					t.Fatalf("%q: a request due before the trace starts: %+v", text, r)
				}
			}
		}
	})
}
