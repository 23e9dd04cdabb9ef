package probe

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// fakeTokenizer is a deterministic stand-in for a server's tokenizer: every
// text costs overhead tokens plus perWord(word) for each word.
type fakeTokenizer struct {
	overhead int
	perWord  func(w string) int
}

func (f fakeTokenizer) count(text string) int {
	n := f.overhead
	for _, w := range strings.Fields(text) {
		n += f.perWord(w)
	}
	return n
}

// oneTokenPerWord is the simplest fake: one token per word plus a BOS.
var oneTokenPerWord = fakeTokenizer{overhead: 1, perWord: func(string) int { return 1 }}

// syllableTokens costs a word one token per three letters, so words differ.
var syllableTokens = fakeTokenizer{overhead: 2, perWord: func(w string) int { return (len(w) + 2) / 3 }}

// newFakeTokenizeServer serves /tokenize on loopback in the style of api with
// the fake tokenizer, and counts calls.
func newFakeTokenizeServer(t *testing.T, api TokenizeAPI, tok fakeTokenizer) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/tokenize" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		calls.Add(1)
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch api {
		case TokenizeVLLM:
			text, ok := body["prompt"].(string)
			if !ok {
				http.Error(w, `{"error":"prompt required"}`, http.StatusBadRequest)
				return
			}
			n := tok.count(text)
			_ = json.NewEncoder(w).Encode(map[string]any{"count": n, "max_model_len": 32768, "tokens": make([]int, n)})
		case TokenizeLlamaCpp:
			// Like llama.cpp, answer any body, with no tokens when content is missing.
			text, _ := body["content"].(string)
			n := 0
			if text != "" {
				n = tok.count(text)
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"tokens": make([]int, n)})
		case TokenizeTGI:
			text, ok := body["inputs"].(string)
			if !ok {
				http.Error(w, "inputs required", http.StatusUnprocessableEntity)
				return
			}
			toks := make([]map[string]any, tok.count(text))
			for i := range toks {
				toks[i] = map[string]any{"id": i, "text": "x", "start": 0, "stop": 1}
			}
			_ = json.NewEncoder(w).Encode(toks)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func TestPromptCalibrationWithTokenizer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		api  TokenizeAPI
		tok  fakeTokenizer
	}{
		{"vllm-word", TokenizeVLLM, oneTokenPerWord},
		{"vllm-syllable", TokenizeVLLM, syllableTokens},
		{"llamacpp-syllable", TokenizeLlamaCpp, syllableTokens},
		{"tgi-word", TokenizeTGI, oneTokenPerWord},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := newFakeTokenizeServer(t, tc.api, tc.tok)
			tokenizer, err := DetectTokenizer(t.Context(), Endpoint{BaseURL: srv.URL + "/v1", HTTPClient: srv.Client()}, "m")
			if err != nil {
				t.Fatal(err)
			}
			if tokenizer.API() != tc.api {
				t.Fatalf("detected %s, want %s", tokenizer.API(), tc.api)
			}
			for _, target := range []int{128, 512, 8192} {
				ps, err := NewPromptSource(t.Context(), PromptConfig{
					PromptTokens: Length{Mean: target}, OutputTokens: Length{Mean: 16},
					Seed: 3, Tokenizer: tokenizer,
				})
				if err != nil {
					t.Fatal(err)
				}
				if c := ps.Calibration(); c.Source != "tokenizer" {
					t.Fatalf("calibration source %q", c.Source)
				}
				for seq := range uint64(20) {
					prompt, n, out := ps.Next(seq)
					if n != target || out != 16 {
						t.Fatalf("Next reports %d/%d tokens, want %d/16", n, out, target)
					}
					got := tc.tok.count(prompt)
					if dev := float64(got-target) / float64(target); dev > 0.05 || dev < -0.05 {
						t.Fatalf("target %d seq %d: server counts %d tokens (%+.1f%%)", target, seq, got, 100*dev)
					}
				}
			}
			// Short prompts: a word more or less is several percent, so
			// every word is counted. Targets from 16 to about 100.
			ps, err := NewPromptSource(t.Context(), PromptConfig{
				PromptTokens: Length{Mean: 48, StdDev: 24}, OutputTokens: Length{Mean: 16}, Seed: 3, Tokenizer: tokenizer,
			})
			if err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			checked := map[int]bool{}
			for seq := range uint64(300) {
				prompt, target, _ := ps.Next(seq)
				if target < 16 {
					continue
				}
				checked[target] = true
				got := tc.tok.count(prompt)
				dev := float64(got-target) / float64(target)
				worst = max(worst, dev, -dev)
				if dev > 0.05 || dev < -0.05 {
					t.Errorf("target %d seq %d: server counts %d tokens (%+.1f%%)", target, seq, got, 100*dev)
				}
			}
			if !checked[16] || !checked[32] {
				t.Fatalf("the short targets missed 16 or 32 tokens: %v", checked)
			}
			t.Logf("%d short targets from 16 tokens: worst error %.1f%%", len(checked), 100*worst)
		})
	}
}

func TestPromptsVaryFromFirstWord(t *testing.T) {
	t.Parallel()
	ps, err := NewPromptSource(t.Context(), PromptConfig{PromptTokens: Length{Mean: 256}, OutputTokens: Length{Mean: 8}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	firsts := map[string]bool{}
	prompts := map[string]bool{}
	for seq := range uint64(500) {
		p, _, _ := ps.Next(seq)
		firsts[strings.Fields(p)[0]] = true
		prompts[p] = true
	}
	if len(firsts) != 500 || len(prompts) != 500 {
		t.Fatalf("500 prompts have %d distinct first words and %d distinct texts", len(firsts), len(prompts))
	}
	// Deterministic: the same seq and seed give the same prompt.
	again, _ := NewPromptSource(t.Context(), PromptConfig{PromptTokens: Length{Mean: 256}, OutputTokens: Length{Mean: 8}, Seed: 1})
	a, _, _ := ps.Next(42)
	b, _, _ := again.Next(42)
	if a != b {
		t.Fatalf("same seed and seq gave different prompts")
	}
}

// TestPromptNonce checks that a nonce gives other prompts from the same
// calibrated blocks, at no tokenize call: no prompt of one nonce shares
// more than its first word with any prompt of another, a derived source
// builds what a source made with that nonce builds, nonce 0 gives the
// seed's prompts, and both learn one usage correction.
func TestPromptNonce(t *testing.T) {
	t.Parallel()
	srv, calls := newFakeTokenizeServer(t, TokenizeVLLM, oneTokenPerWord)
	tokenizer, err := NewHTTPTokenizer(Endpoint{BaseURL: srv.URL, HTTPClient: srv.Client()}, "m", TokenizeVLLM)
	if err != nil {
		t.Fatal(err)
	}
	cfg := PromptConfig{PromptTokens: Length{Mean: 256}, OutputTokens: Length{Mean: 8}, Seed: 1, Tokenizer: tokenizer}
	base, err := NewPromptSource(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	calibrated := calls.Load()
	derived := base.WithNonce(77)
	if calls.Load() != calibrated {
		t.Fatalf("WithNonce made %d tokenize calls, want none", calls.Load()-calibrated)
	}
	cfg.Nonce = 77
	direct, err := NewPromptSource(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}

	const n = 300
	seen := map[string]bool{} // the first two words of every base prompt
	for seq := range uint64(n) {
		p, _, _ := base.Next(seq)
		seen[strings.Join(strings.Fields(p)[:2], " ")] = true
	}
	for seq := range uint64(n) {
		p, target, _ := derived.Next(seq)
		q, _, _ := direct.Next(seq)
		if p != q {
			t.Fatalf("seq %d: the derived source and one built with the nonce differ", seq)
		}
		if got := oneTokenPerWord.count(p); got < target*95/100 || got > target*105/100 {
			t.Fatalf("seq %d: derived prompt counts %d tokens, want %d±5%%", seq, got, target)
		}
		if lead := strings.Join(strings.Fields(p)[:2], " "); seen[lead] {
			t.Fatalf("seq %d: a prompt with the nonce starts as one without it does: %q", seq, lead)
		}
		b, _, _ := base.Next(seq)
		if strings.Fields(b)[0] == strings.Fields(p)[0] {
			t.Fatalf("seq %d: the same first word with and without the nonce", seq)
		}
	}

	// Back to nonce 0: the seed's own prompts.
	back, _, _ := derived.WithNonce(0).Next(5)
	if orig, _, _ := base.Next(5); back != orig {
		t.Fatal("nonce 0 does not give the seed's prompts")
	}
	// The usage correction is learnt once for both.
	for seq := range uint64(usageSamples) {
		p, target, _ := derived.Next(seq)
		derived.Observe(target, 2*oneTokenPerWord.count(p))
	}
	if c := base.Calibration(); c.Observations != usageSamples || c.Source != "tokenizer+usage" {
		t.Fatalf("the base source did not learn what the derived one observed: %+v", c)
	}
}

func TestSharedPrefix(t *testing.T) {
	t.Parallel()
	srv, _ := newFakeTokenizeServer(t, TokenizeVLLM, oneTokenPerWord)
	tokenizer, err := NewHTTPTokenizer(Endpoint{BaseURL: srv.URL, HTTPClient: srv.Client()}, "m", TokenizeVLLM)
	if err != nil {
		t.Fatal(err)
	}
	const prefix, target = 100, 512
	ps, err := NewPromptSource(t.Context(), PromptConfig{
		PromptTokens: Length{Mean: target}, OutputTokens: Length{Mean: 8}, SharedPrefix: prefix, Seed: 9, Tokenizer: tokenizer,
	})
	if err != nil {
		t.Fatal(err)
	}
	a, _, _ := ps.Next(1)
	b, _, _ := ps.Next(2)
	wa, wb := strings.Fields(a), strings.Fields(b)
	common := 0
	for common < min(len(wa), len(wb)) && wa[common] == wb[common] {
		common++
	}
	// One token per word: the shared words are the shared tokens.
	if common != prefix {
		t.Fatalf("prompts share %d leading words, want %d", common, prefix)
	}
	for _, p := range []string{a, b} {
		if got := oneTokenPerWord.count(p); got < target*95/100 || got > target*105/100 {
			t.Fatalf("prompt with prefix counts %d tokens, want %d±5%%", got, target)
		}
	}
}

func TestObserveCorrectsFromUsage(t *testing.T) {
	t.Parallel()
	// No tokenizer: the source assumes one token per word, while the
	// "server" counts each word as two tokens plus 10 for a chat template.
	server := fakeTokenizer{overhead: 10, perWord: func(string) int { return 2 }}
	ps, err := NewPromptSource(t.Context(), PromptConfig{PromptTokens: Length{Mean: 400, StdDev: 100}, OutputTokens: Length{Mean: 8}, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	for seq := range uint64(usageSamples) {
		p, target, _ := ps.Next(seq)
		ps.Observe(target, server.count(p))
	}
	c := ps.Calibration()
	if c.Source != "assumed+usage" || c.Observations != usageSamples {
		t.Fatalf("calibration %+v, want learnt from usage", c)
	}
	for seq := uint64(100); seq < 120; seq++ {
		p, target, _ := ps.Next(seq)
		got := server.count(p)
		if dev := float64(got-target) / float64(target); dev > 0.05 || dev < -0.05 {
			t.Fatalf("after correction: target %d, server counts %d (%+.1f%%)", target, got, 100*dev)
		}
	}
	// Later observations do not move the learnt correction.
	ps.Observe(100, 1000)
	if ps.Calibration() != c {
		t.Fatalf("calibration moved after it was learnt")
	}
}

func TestTokenizerErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nope", http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	if _, err := DetectTokenizer(t.Context(), Endpoint{BaseURL: srv.URL, HTTPClient: srv.Client()}, "m"); err == nil || !strings.Contains(err.Error(), "no tokenize endpoint") {
		t.Fatalf("DetectTokenizer on a server without one: %v", err)
	}
	tok, err := NewHTTPTokenizer(Endpoint{BaseURL: srv.URL, HTTPClient: srv.Client()}, "m", TokenizeVLLM)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewPromptSource(t.Context(), PromptConfig{PromptTokens: Length{Mean: 8}, OutputTokens: Length{Mean: 8}, Tokenizer: tok}); !errors.Is(err, ErrTokenizer) || !strings.Contains(err.Error(), "POST /tokenize answered 404 Not Found: nope") {
		t.Fatalf("NewPromptSource with a failing tokenizer: %v", err)
	}
	if _, err := NewHTTPTokenizer(Endpoint{BaseURL: "localhost:1"}, "m", TokenizeVLLM); err == nil {
		t.Fatalf("NewHTTPTokenizer accepted a URL without a scheme")
	}
	if _, err := NewHTTPTokenizer(Endpoint{BaseURL: srv.URL}, "m", "sglang"); err == nil {
		t.Fatalf("NewHTTPTokenizer accepted an unknown api")
	}
	for _, body := range []string{`{}`, `nope`, `[1,`} {
		if _, err := parseTokenCount([]byte(body)); err == nil {
			t.Errorf("parseTokenCount(%q) = nil error", body)
		}
	}
}

func TestPromptFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	content := strings.Join([]string{
		`{"prompt": "tell me about cats"}`,
		``,
		`plain text prompt here`,
		`{"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": [{"type": "text", "text": "hello"}, {"type": "image_url", "image_url": {"url": "x"}}]}]}`,
	}, "\n")
	if err := os.WriteFile(good, []byte(content+"\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ps, err := NewPromptSource(t.Context(), PromptConfig{File: good, OutputTokens: Length{Mean: 32}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"tell me about cats", "plain text prompt here", "be brief\nhello"}
	for seq := range uint64(6) {
		got, n, out := ps.Next(seq)
		if got != want[seq%3] || n < 1 || out != 32 {
			t.Fatalf("Next(%d) = %q, %d, %d; want %q", seq, got, n, out, want[seq%3])
		}
	}

	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"prompt\": \"ok\"}\nfine\n{\"prompt\": oops}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = NewPromptSource(t.Context(), PromptConfig{File: bad, OutputTokens: Length{Mean: 32}})
	if err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), bad) {
		t.Fatalf("bad JSON line: error %v, want one naming the file and line 3", err)
	}
	_, err = NewPromptSource(t.Context(), PromptConfig{File: filepath.Join(dir, "missing.txt"), OutputTokens: Length{Mean: 32}})
	if err == nil || !strings.Contains(err.Error(), "--prompt-file") || !os.IsNotExist(unwrapPromptErr(err)) {
		t.Fatalf("missing file: error %v", err)
	}
	binary := filepath.Join(dir, "weights.bin")
	if err := os.WriteFile(binary, []byte("fine\nalso fine\n\x7fELF\x02\x01\x00\x00\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = NewPromptSource(t.Context(), PromptConfig{File: binary, OutputTokens: Length{Mean: 32}})
	if err == nil || !strings.Contains(err.Error(), "line 3: binary data") {
		t.Fatalf("binary file: error %v, want one naming line 3 as binary", err)
	}
	empty := filepath.Join(dir, "empty.txt")
	if err := os.WriteFile(empty, []byte("\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewPromptSource(t.Context(), PromptConfig{File: empty, OutputTokens: Length{Mean: 32}}); err == nil || !strings.Contains(err.Error(), "no prompts") {
		t.Fatalf("empty file: error %v", err)
	}
}

func unwrapPromptErr(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func TestPromptFileCountedByTokenizer(t *testing.T) {
	t.Parallel()
	srv, calls := newFakeTokenizeServer(t, TokenizeVLLM, oneTokenPerWord)
	tok, _ := NewHTTPTokenizer(Endpoint{BaseURL: srv.URL, HTTPClient: srv.Client()}, "m", TokenizeVLLM)
	path := filepath.Join(t.TempDir(), "p.txt")
	if err := os.WriteFile(path, []byte("one two three\nfour five\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := calls.Load()
	ps, err := NewPromptSource(context.Background(), PromptConfig{File: path, OutputTokens: Length{Mean: 4}, Tokenizer: tok})
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() == before {
		t.Fatalf("tokenizer not used")
	}
	if _, n, _ := ps.Next(0); n != 4 {
		t.Fatalf("first line counted %d tokens, want 4 (3 words + BOS)", n)
	}
	if _, n, _ := ps.Next(1); n != 3 {
		t.Fatalf("second line counted %d tokens, want 3", n)
	}
}

func TestParsePromptLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line, want string
		ok         bool
	}{
		{`hello world`, "hello world", true},
		{`   `, "", true},
		{`{"prompt":"hi"}`, "hi", true},
		{`{"prompt":""}`, "", false},
		{`{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}`, "a\nb", true},
		{`{"messages":[]}`, "", false},
		{`{"messages":[{"role":"user","content":42}]}`, "", false},
		{`{"messages":[{"role":"user","content":null}]}`, "", false},
		{`{"other":1}`, "", false},
		{`{"prompt":`, "", false},
	}
	for _, tt := range tests {
		got, err := parsePromptLine([]byte(tt.line))
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parsePromptLine(%q) = %q, %v; want %q ok=%v", tt.line, got, err, tt.want, tt.ok)
		}
	}
}

func FuzzParsePromptLine(f *testing.F) {
	for _, s := range []string{`plain`, `{"prompt":"x"}`, `{"messages":[{"content":"a"}]}`, `{"messages":[{"content":[{"type":"text","text":"t"}]}]}`, `{`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		p, err := parsePromptLine(line)
		if err == nil && p == "" && len(strings.TrimSpace(string(line))) > 0 && line[0] != '{' {
			t.Fatalf("non-blank plain line %q gave an empty prompt", line)
		}
		// Whole files parse without panicking, whatever the bytes.
		_, _ = parsePrompts(strings.NewReader(string(line) + "\n" + string(line)))
	})
}
