package probe

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/recorder"
)

func TestReadTraceFormats(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tests := []struct {
		file   string
		format string
		want   []TraceRequest
	}{
		{"azure_sample.csv", TraceAzure, []TraceRequest{
			{0, 374, 44, nil},
			{4314579 * time.Microsecond, 396, 109, nil},
			{4332397 * time.Microsecond, 879, 4, nil},
			{4623925 * time.Microsecond, 91, 29, nil},
			{5424047 * time.Microsecond, 1942, 1, nil}, // no output asks for one token
			{6099842 * time.Microsecond, 1457, 231, nil},
		}},
		{"mooncake_sample.jsonl", TraceMooncake, []TraceRequest{
			{0, 1300, 12, []uint64{0, 1, 2}},
			{0, 1100, 20, []uint64{0, 1, 3}},
			{1730 * ms, 600, 8, []uint64{4, 5}},
			{3021 * ms, 1536, 31, []uint64{0, 1, 6}},
			{4999 * ms, 200, 1, []uint64{7}},
		}},
		{"latscope_sample.jsonl", TraceJSONL, []TraceRequest{
			{0, 2048, 256, nil},
			{500 * ms, 512, 128, nil},
			{750 * ms, 64, 16, nil},
		}},
		{"latscope_sample.csv", TraceCSV, []TraceRequest{
			{0, 512, 128, nil},
			{20 * ms, 1024, 64, nil},
			{20 * ms, 32, 8, nil},
			{1500 * ms, 256, 256, nil},
		}},
	}
	for _, tt := range tests {
		tr, err := ReadTrace(filepath.Join("testdata", "trace", tt.file))
		if err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		if tr.Format != tt.format || len(tr.Requests) != len(tt.want) {
			t.Fatalf("%s: format %s, %d requests; want %s, %d", tt.file, tr.Format, len(tr.Requests), tt.format, len(tt.want))
		}
		for i, r := range tr.Requests {
			w := tt.want[i]
			if r.At != w.At || r.PromptTokens != w.PromptTokens || r.OutputTokens != w.OutputTokens || len(r.HashIDs) != len(w.HashIDs) {
				t.Errorf("%s request %d: %+v, want %+v", tt.file, i, r, w)
			}
		}
	}
}

func TestReadTraceNamesTheBadLine(t *testing.T) {
	t.Parallel()
	for file, want := range map[string]string{
		"malformed_mooncake.jsonl": "malformed_mooncake.jsonl: line 3: not a Mooncake trace line",
		"malformed_azure.csv":      "malformed_azure.csv: line 3: want 3 comma-separated fields",
	} {
		_, err := ReadTrace(filepath.Join("testdata", "trace", file))
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
		_, err := ParseTrace(strings.NewReader(text))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one with %q", text, err, want)
		}
	}
	if _, err := ReadTrace(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Errorf("a missing file read as a trace")
	}
}

func TestReadTraceFromRecording(t *testing.T) {
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
	tr, err := ReadTrace(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []TraceRequest{{0, 512, 64, nil}, {200 * time.Millisecond, 40, 7, nil}}
	if tr.Format != TraceRecording || len(tr.Requests) != 2 || tr.Requests[0].At != want[0].At || tr.Requests[1].At != want[1].At ||
		tr.Requests[0].PromptTokens != 512 || tr.Requests[0].OutputTokens != 64 || tr.Requests[1].OutputTokens != 7 {
		t.Fatalf("trace %+v, want %+v", tr, want)
	}
}

func TestTracePacer(t *testing.T) {
	t.Parallel()
	tr := &Trace{Requests: []TraceRequest{{At: 0}, {At: time.Second}, {At: 3 * time.Second}}}
	p, err := NewTracePacer(tr, 2)
	if err != nil {
		t.Fatal(err)
	}
	for hits, want := range []time.Duration{0, 500 * time.Millisecond, 1500 * time.Millisecond} {
		if wait, stop := p.Pace(100*time.Millisecond, uint64(hits)); stop || wait != want-100*time.Millisecond {
			t.Errorf("hit %d: wait %v stop %v, want %v", hits, wait, stop, want-100*time.Millisecond)
		}
	}
	if _, stop := p.Pace(0, 3); !stop {
		t.Errorf("no stop after the trace")
	}
	for _, speed := range []float64{0, -1} {
		if _, err := NewTracePacer(tr, speed); err == nil {
			t.Errorf("speed %v accepted", speed)
		}
	}
}

// Trace prompts have the trace's lengths, and requests that share leading
// Mooncake hash ids share those blocks' text, and nothing more.
func TestTracePrompts(t *testing.T) {
	t.Parallel()
	tok := syllableTokens
	srv, _ := newFakeTokenizeServer(t, TokenizeVLLM, tok)
	tokenizer, err := NewHTTPTokenizer(Endpoint{BaseURL: srv.URL, HTTPClient: srv.Client()}, "m", TokenizeVLLM)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := ReadTrace(filepath.Join("testdata", "trace", "mooncake_sample.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ps, err := NewPromptSource(t.Context(), PromptConfig{PromptTokens: Length{Mean: 512}, OutputTokens: Length{Mean: 8},
		Seed: 5, Tokenizer: tokenizer, ShortestPrompt: min(tr.ShortestPrompt(), 16)})
	if err != nil {
		t.Fatal(err)
	}
	var prompts []string
	for seq := range uint64(len(tr.Requests)) {
		p, n, out := ps.ForTrace(tr, seq)
		want := tr.Requests[seq]
		if n != want.PromptTokens || out != want.OutputTokens {
			t.Fatalf("request %d: %d/%d tokens, want %d/%d", seq, n, out, want.PromptTokens, want.OutputTokens)
		}
		if got := tok.count(p); got < n*95/100 || got > n*105/100 {
			t.Errorf("request %d: server counts %d tokens, want %d±5%%", seq, got, n)
		}
		prompts = append(prompts, p)
	}
	// Requests 0, 1 and 3 share hash ids 0 and 1: their first 1024 tokens.
	shared := func(a, b string) int {
		n := 0
		for n < len(a) && n < len(b) && a[n] == b[n] {
			n++
		}
		return tok.count(a[:strings.LastIndexByte(a[:n+1], ' ')+1])
	}
	for _, pair := range [][2]int{{0, 1}, {0, 3}, {1, 3}} {
		if got := shared(prompts[pair[0]], prompts[pair[1]]); got < 1000 || got > 1030 {
			t.Errorf("requests %d and %d share %d leading tokens, want about 1024 (two hash blocks)", pair[0], pair[1], got)
		}
	}
	for _, pair := range [][2]int{{0, 2}, {2, 4}, {1, 4}} {
		if a, b := strings.Fields(prompts[pair[0]])[0], strings.Fields(prompts[pair[1]])[0]; a == b {
			t.Errorf("requests %d and %d share no hash id but start alike (%q)", pair[0], pair[1], a)
		}
	}

	// Without hash ids, every prompt is its own from its first word.
	plain := &Trace{Requests: []TraceRequest{{PromptTokens: 16, OutputTokens: 1}, {PromptTokens: 16, OutputTokens: 1}, {PromptTokens: 40, OutputTokens: 1}}}
	a, _, _ := ps.ForTrace(plain, 0)
	b, _, _ := ps.ForTrace(plain, 1)
	if strings.Fields(a)[0] == strings.Fields(b)[0] || tok.count(a) != 16 || tok.count(b) != 16 {
		t.Errorf("prompts %q and %q: want 16 tokens each, starting differently", a, b)
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
	parsers := []func([]byte) (TraceRequest, error){parseJSONLine, parseMooncakeLine, parseAzureLine, parseCSVLine}
	f.Fuzz(func(t *testing.T, line string) {
		for _, parse := range parsers {
			r, err := parse([]byte(line))
			if err != nil {
				continue
			}
			if r.PromptTokens < 1 || r.PromptTokens > maxTokenLength || r.OutputTokens < 1 || r.OutputTokens > maxTokenLength {
				t.Fatalf("%q parsed to impossible lengths %+v", line, r)
			}
		}
		// A whole trace of the line, as the first line and after a header.
		for _, text := range []string{line, "timestamp,prompt_tokens,output_tokens\n" + line, "TIMESTAMP,ContextTokens,GeneratedTokens\n" + line} {
			tr, err := ParseTrace(strings.NewReader(text))
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
