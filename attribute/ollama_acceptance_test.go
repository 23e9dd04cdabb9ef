//go:build acceptance

package attribute

// A real Ollama (built from source, CPU only) serving a local GGUF file:
// its native NDJSON routes and its OpenAI-compatible one, through the
// probe and the attributor.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/probe"
)

// The environment that names what the Ollama test runs: the ollama binary
// (its llama-server beside it, in ../lib/ollama) and a GGUF model file.
const (
	ollamaEnv     = "LATSCOPE_OLLAMA"
	ollamaGGUFEnv = "LATSCOPE_OLLAMA_GGUF"
)

// TestAcceptanceOllama: `ollama serve` with a model created from a GGUF
// file; 200 streams on each of /api/chat, /api/generate (NDJSON) and
// /v1/chat/completions (SSE), each run with prompts of its own (Ollama
// keeps llama-server's prompt cache across requests). Every request
// succeeds, and on the native routes every request's prefill is the
// prompt_eval_duration of its final object, read off the wire by a proxy
// of the test's own, within 1 ms, and its queue the load_duration.
func TestAcceptanceOllama(t *testing.T) {
	bin, gguf := os.Getenv(ollamaEnv), os.Getenv(ollamaGGUFEnv)
	if bin == "" || gguf == "" {
		t.Skip("SKIPPED: " + ollamaEnv + " (the ollama binary) and " + ollamaGGUFEnv + " (a GGUF model file) are not both set, so the check against a real Ollama did not run")
	}
	base := startOllama(t, bin, gguf)
	tap := &finalTap{byID: map[string]ollamaFinal{}}
	front := httptest.NewServer(tap.proxy(base))
	t.Cleanup(front.Close)
	for i, dialect := range []string{probe.DialectOllamaChat, probe.DialectOllamaGenerate, probe.DialectOpenAIChat} {
		t.Run(dialect, func(t *testing.T) {
			reqs := runOllama(t, front.URL, dialect, uint64(i+1))
			var checked int
			var worst time.Duration
			for _, r := range reqs {
				checkSum(t, r, r.Breakdown)
				fin, ok := tap.get(r.ID)
				if dialect == probe.DialectOpenAIChat || !ok || fin.PromptEvalCount == 0 {
					continue
				}
				checked++
				pre, has := stageOf(r, event.StagePrefill)
				diff := (pre.Duration - time.Duration(fin.PromptEvalDuration)).Abs()
				worst = max(worst, diff)
				if !has || diff > time.Millisecond {
					t.Errorf("%s: prefill %v (present %v), prompt_eval_duration %v on the wire", r.ID, pre.Duration, has, time.Duration(fin.PromptEvalDuration))
				}
				if q, _ := stageOf(r, event.StageQueue); q.Duration != time.Duration(fin.LoadDuration) {
					t.Errorf("%s: queue %v, load_duration %v on the wire", r.ID, q.Duration, time.Duration(fin.LoadDuration))
				}
			}
			if dialect != probe.DialectOpenAIChat && checked != len(reqs) {
				t.Errorf("%d of %d requests had a final object with prompt_eval_duration on the wire", checked, len(reqs))
			}
			logOllamaRun(t, dialect, reqs, checked, worst)
		})
	}
}

// logOllamaRun logs a run's figures: its TTFT, prefill and ITL medians.
func logOllamaRun(t *testing.T, dialect string, reqs []*event.Request, checked int, worst time.Duration) {
	t.Helper()
	var ttft, prefill, itl []time.Duration
	for _, r := range reqs {
		ttft = append(ttft, r.TTFT)
		if p, ok := stageOf(r, event.StagePrefill); ok {
			prefill = append(prefill, p.Duration)
		}
		for i := 1; i < len(r.Chunks); i++ {
			itl = append(itl, r.Chunks[i].At-r.Chunks[i-1].At)
		}
	}
	t.Logf("%s: %d requests, 0 errors; TTFT p50 %v, prefill p50 %v, ITL p50 %v; prefill = prompt_eval_duration on %d, at most %v apart",
		dialect, len(reqs), median(ttft), median(prefill), median(itl), checked, worst)
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// runOllama sends 200 requests (and 2 warm-up ones) of 128-token prompts
// and 16 output tokens, two at a time, in dialect, and returns the
// successful records; any error fails the test.
func runOllama(t *testing.T, url, dialect string, nonce uint64) []*event.Request {
	t.Helper()
	client, err := probe.NewClient(probe.ClientConfig{BaseURL: url, Dialect: dialect, Model: "tiny", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	prompts, err := probe.NewPromptSource(ctx, probe.PromptConfig{PromptTokens: probe.Length{Mean: 128}, OutputTokens: probe.Length{Mean: 16}, Seed: 7, Nonce: nonce})
	if err != nil {
		t.Fatal(err)
	}
	runner, err := probe.NewRunner(client, probe.LoadConfig{Concurrency: 2, Requests: 200, Warmup: 2}, prompts)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := runPipeline(ctx, t, pipeline.Config{Primary: []pipeline.Source{runner}, Stage: NewAttributor(AttributorConfig{Server: "ollama"})})
	var reqs []*event.Request
	for _, r := range got {
		if r.Warmup {
			continue
		}
		if !r.OK() {
			t.Errorf("%s: %s (%s)", r.ID, r.Outcome, r.Error)
			continue
		}
		reqs = append(reqs, r)
	}
	if len(reqs) != 200 {
		t.Fatalf("%d requests ok, want 200", len(reqs))
	}
	return reqs
}

// startOllama runs `ollama serve` in a home of the test's own, creates the
// model "tiny" from gguf, and returns the server's URL.
func startOllama(t *testing.T, bin, gguf string) string {
	t.Helper()
	home := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	env := append(os.Environ(), "HOME="+home, "OLLAMA_MODELS="+filepath.Join(home, "models"), "OLLAMA_HOST="+addr,
		"OLLAMA_NUM_PARALLEL=4", "OLLAMA_KEEP_ALIVE=-1")
	var out bytes.Buffer
	serve := exec.Command(bin, "serve")
	serve.Env, serve.Stdout, serve.Stderr = env, &out, &out
	// Its own process group: ollama serve starts a runner (llama-server) of
	// its own, which a kill of serve alone would leave running.
	serve.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := serve.Start(); err != nil {
		t.Fatalf("start %s serve: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-serve.Process.Pid, syscall.SIGKILL)
		_ = serve.Wait()
		if t.Failed() {
			t.Logf("ollama serve's output:\n%s", tail(out.String(), 4000))
		}
	})
	base := "http://" + addr
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(base + "/api/version")
		if err == nil {
			_ = resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ollama serve did not answer in a minute: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	modelfile := filepath.Join(home, "Modelfile")
	if err := os.WriteFile(modelfile, fmt.Appendf(nil, "FROM %s\nPARAMETER num_thread 1\nPARAMETER num_ctx 2048\n", gguf), 0o600); err != nil {
		t.Fatal(err)
	}
	create := exec.Command(bin, "create", "tiny", "-f", modelfile)
	create.Env = env
	if b, err := create.CombinedOutput(); err != nil {
		t.Fatalf("ollama create: %v\n%s", err, tail(string(b), 2000))
	}
	return base
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// ollamaFinal is what the test reads of a native stream's final object.
type ollamaFinal struct {
	PromptEvalCount    int   `json:"prompt_eval_count"`
	PromptEvalDuration int64 `json:"prompt_eval_duration"`
	LoadDuration       int64 `json:"load_duration"`
}

// finalTap is a reverse proxy that reads each native stream's final object
// (the line with "done": true) as it passes, by the request's X-Request-Id;
// the client's request body reaches Ollama whole.
type finalTap struct {
	mu   sync.Mutex
	byID map[string]ollamaFinal
}

func (f *finalTap) get(id string) (ollamaFinal, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fin, ok := f.byID[id]
	return fin, ok
}

func (f *finalTap) proxy(base string) http.Handler {
	u, _ := url.Parse(base)
	rp := &httputil.ReverseProxy{FlushInterval: -1, Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(u)
		// Forward the request's body whole, as nginx buffers it: streamed
		// through, the transport's last write of it can race the answer.
		if pr.Out.Body != nil {
			b, err := io.ReadAll(io.LimitReader(pr.Out.Body, 4<<20))
			_ = pr.Out.Body.Close()
			if err == nil {
				pr.Out.Body, pr.Out.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
			}
		}
	}}
	rp.ModifyResponse = func(resp *http.Response) error {
		id := resp.Request.Header.Get("X-Request-Id")
		if id == "" || resp.Header.Get("Content-Type") != "application/x-ndjson" {
			return nil
		}
		pr, pw := io.Pipe()
		body := resp.Body
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(body, pw), closerFunc(func() error { _ = pw.Close(); return body.Close() })}
		go f.scan(id, pr)
		return nil
	}
	return rp
}

// scan reads NDJSON lines until the pipe closes, keeping the final object.
func (f *finalTap) scan(id string, r *io.PipeReader) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var line struct {
			Done bool `json:"done"`
			ollamaFinal
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Done {
			f.mu.Lock()
			f.byID[id] = line.ollamaFinal
			f.mu.Unlock()
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

type closerFunc func() error

func (c closerFunc) Close() error { return c() }
