package probe

import (
	"strings"
	"testing"
	"time"
)

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
	// tracefile's mooncake_sample.jsonl, as tracefile.Read reads it.
	ms := time.Millisecond
	tr := &Trace{Format: "mooncake", BlockTokens: 512, Requests: []TraceRequest{
		{0, 1300, 12, []uint64{0, 1, 2}},
		{0, 1100, 20, []uint64{0, 1, 3}},
		{1730 * ms, 600, 8, []uint64{4, 5}},
		{3021 * ms, 1536, 31, []uint64{0, 1, 6}},
		{4999 * ms, 200, 1, []uint64{7}},
	}}
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
