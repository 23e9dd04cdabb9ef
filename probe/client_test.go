package probe

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// wireStageOrder is the order of the client stages.
var wireStageOrder = []event.Stage{
	event.StageSchedLag, event.StageSerialize, event.StageDNS, event.StageConnect, event.StageTLS,
	event.StageConnWait, event.StageWrite, event.StageWaitHeaders, event.StageFirstToken,
}

// checkWireTimeline asserts the record's internal consistency: stages in order,
// measured, non-negative and summing exactly to TTFT; chunk times ordered and
// inside [TTFT, E2E].
func checkWireTimeline(t *testing.T, rec *event.Request) {
	t.Helper()
	var sum time.Duration
	next := 0
	for _, st := range rec.Stages {
		for next < len(wireStageOrder) && wireStageOrder[next] != st.Stage {
			next++
		}
		if next == len(wireStageOrder) {
			t.Fatalf("stage %s out of order in %+v", st.Stage, rec.Stages)
		}
		if st.Provenance != event.Measured || st.Duration < 0 {
			t.Errorf("stage %+v: want measured and >= 0", st)
		}
		sum += st.Duration
	}
	if len(rec.Chunks) == 0 {
		return
	}
	if last := rec.Stages[len(rec.Stages)-1].Stage; last != event.StageFirstToken {
		t.Errorf("last stage %s, want first_token", last)
	}
	if sum != rec.TTFT {
		t.Errorf("stages sum to %v, TTFT is %v (stages %+v)", sum, rec.TTFT, rec.Stages)
	}
	if rec.TTFT != rec.SchedLag+rec.Chunks[0].At {
		t.Errorf("TTFT %v != sched lag %v + first chunk %v", rec.TTFT, rec.SchedLag, rec.Chunks[0].At)
	}
	if rec.FirstEvent <= 0 || rec.FirstEvent > rec.TTFT {
		t.Errorf("first event %v outside (0, TTFT %v]", rec.FirstEvent, rec.TTFT)
	}
	for i := 1; i < len(rec.Chunks); i++ {
		if rec.Chunks[i].At < rec.Chunks[i-1].At {
			t.Fatalf("chunk %d at %v before chunk %d at %v", i, rec.Chunks[i].At, i-1, rec.Chunks[i-1].At)
		}
	}
	for _, ch := range rec.Chunks {
		if ch.Batch < 1 || ch.Tokens < 1 {
			t.Fatalf("chunk %+v: want batch and tokens >= 1", ch)
		}
	}
	var itl time.Duration
	for _, g := range rec.ITLs() {
		itl += g
	}
	if first, last := rec.Chunks[0].At, rec.Chunks[len(rec.Chunks)-1].At; itl != last-first {
		t.Errorf("ITLs sum to %v, want %v", itl, last-first)
	}
	if rec.OK() && rec.E2E < rec.SchedLag+rec.Chunks[len(rec.Chunks)-1].At {
		t.Errorf("E2E %v before the last chunk %v", rec.E2E, rec.Chunks[len(rec.Chunks)-1].At)
	}
}

func TestDialectsEndToEnd(t *testing.T) {
	t.Parallel()
	const gap = 2 * time.Millisecond
	vllmUsage := `{"id":"chatcmpl-probe-0001","object":"chat.completion.chunk","created":1767000000,"model":"m","choices":[],"usage":{"prompt_tokens":42,"completion_tokens":5,"total_tokens":47},"metrics":{"time_to_first_token_ms":31.5,"generation_time_ms":1012.0,"queue_time_ms":0.4,"mean_itl_ms":7.97,"tokens_per_second":123.1}}`
	ollamaUsage := `{"id":"cmpl-1","object":"text_completion","created":1767000000,"model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}`
	llamaFinal5 := strings.Replace(llamaFinal, `"tokens_predicted":64`, `"tokens_predicted":5`, 1)
	tgiFinal5 := strings.Replace(tgiFinal, `"generated_tokens":2`, `"generated_tokens":5`, 1)
	tests := []struct {
		dialect     string
		contentType string
		frames      []wireFrame
		wantPath    string
		wantChunks  int
		wantOut     int
		wantPrompt  int
		wantSource  string
		wantFlags   []event.Flag
		bodyKeys    []string
	}{
		{
			dialect: DialectOpenAIChat, contentType: "text/event-stream",
			frames:   pacedFrames(gap, sseFrames(append(append([]string{vllmRoleChunk}, repeatStr(vllmContentChunk, 5)...), vllmFinishChunk, vllmUsage, "[DONE]")...)),
			wantPath: "/v1/chat/completions", wantChunks: 5, wantOut: 5, wantPrompt: 42, wantSource: "vllm.metrics",
			wantFlags: []event.Flag{event.FlagRoleOnlyFirst},
			bodyKeys:  []string{`"stream":true`, `"include_usage":true`, `"max_tokens":5`, `"min_tokens":5`, `"ignore_eos":true`, `"messages":[{"role":"user"`},
		},
		{
			dialect: DialectOpenAICompletions, contentType: "text/event-stream",
			frames:   pacedFrames(gap, sseFrames(append(repeatStr(ollamaCompletionZero, 5), ollamaUsage, "[DONE]")...)),
			wantPath: "/v1/completions", wantChunks: 5, wantOut: 5, wantPrompt: 12,
			bodyKeys: []string{`"prompt":"What is`, `"max_tokens":5`},
		},
		{
			dialect: DialectLlamaCpp, contentType: "text/event-stream",
			frames:   pacedFrames(gap, sseFrames(append(repeatStr(llamaPartial, 5), llamaFinal5)...)),
			wantPath: "/completion", wantChunks: 5, wantOut: 5, wantPrompt: 9, wantSource: "llamacpp.timings",
			bodyKeys: []string{`"n_predict":5`, `"ignore_eos":true`, `"stream":true`},
		},
		{
			dialect: DialectTGI, contentType: "text/event-stream",
			frames:   pacedFrames(gap, tgiWireFrames(append(repeatStr(tgiToken, 4), tgiFinal5)...)),
			wantPath: "/generate_stream", wantChunks: 5, wantOut: 5, wantPrompt: 9,
			bodyKeys: []string{`"inputs":"What is`, `"max_new_tokens":5`, `"details":true`},
		},
		{
			dialect: DialectOllamaGenerate, contentType: "application/x-ndjson",
			frames:   pacedFrames(gap, ndjsonFrames(append(repeatStr(ollamaGenToken, 5), ollamaGenFinal)...)),
			wantPath: "/api/generate", wantChunks: 5, wantOut: 64, wantPrompt: 26, wantSource: "ollama.final",
			bodyKeys: []string{`"model":"m"`, `"num_predict":5`, `"stream":true`},
		},
		{
			dialect: DialectOllamaChat, contentType: "application/x-ndjson",
			frames:   pacedFrames(gap, ndjsonFrames(append(repeatStr(ollamaChatToken, 5), ollamaChatFinal)...)),
			wantPath: "/api/chat", wantChunks: 5, wantOut: 64, wantPrompt: 26, wantSource: "ollama.final",
			bodyKeys: []string{`"messages":[{"role":"user"`, `"num_predict":5`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.dialect, func(t *testing.T) {
			t.Parallel()
			srv := newWireServer(t, wireStream(tt.contentType, tt.frames))
			c := newWireClient(t, srv.URL, tt.dialect, func(cfg *ClientConfig) {
				cfg.APIKey = "sk-test"
				cfg.Headers = http.Header{"X-Probe": {"yes"}}
			})
			spec := wireSpec("req-1", 5)
			spec.Intended = time.Now().Add(-3 * time.Millisecond) // the probe started late
			rec := c.Do(context.Background(), spec)
			if rec.Outcome != event.OutcomeOK {
				t.Fatalf("outcome %s: %s", rec.Outcome, rec.Error)
			}
			checkWireTimeline(t, rec)
			if rec.SchedLag < 3*time.Millisecond || rec.Stages[0].Stage != event.StageSchedLag {
				t.Errorf("sched lag %v, stages %+v", rec.SchedLag, rec.Stages)
			}
			if len(rec.Chunks) != tt.wantChunks || rec.OutputTokens != tt.wantOut || rec.PromptTokens != tt.wantPrompt {
				t.Errorf("chunks %d, output %d, prompt %d; want %d, %d, %d",
					len(rec.Chunks), rec.OutputTokens, rec.PromptTokens, tt.wantChunks, tt.wantOut, tt.wantPrompt)
			}
			if tt.wantSource != "" && (rec.Server == nil || rec.Server.Source != tt.wantSource) {
				t.Errorf("server timing %+v, want source %s", rec.Server, tt.wantSource)
			}
			checkFlags(t, rec, tt.wantFlags)
			if rec.ReusedConn || rec.ConnectRTT <= 0 {
				t.Errorf("first request: reused %v, connect RTT %v", rec.ReusedConn, rec.ConnectRTT)
			}
			if rec.ID != "req-1" || rec.Dialect != tt.dialect || rec.Target != srv.URL || rec.TargetOutputTokens != 5 || rec.Status != 200 {
				t.Errorf("record identity %+v", rec)
			}
			checkWireRequest(t, srv, tt.dialect, tt.wantPath, tt.bodyKeys)

			checkSecondWireRequest(t, c)
		})
	}
}

// checkWireRequest checks the one request the server got: its path, its
// headers (id, trace, credentials, extra header, accept, content type) and
// a JSON body with bodyKeys in it.
func checkWireRequest(t *testing.T, srv *wireServer, dialect, wantPath string, bodyKeys []string) {
	t.Helper()
	reqs := srv.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	got := reqs[0]
	if got.path != wantPath {
		t.Errorf("path %s, want %s", got.path, wantPath)
	}
	wantAccept := "text/event-stream"
	if strings.HasPrefix(dialect, "ollama") {
		wantAccept = "application/x-ndjson"
	}
	for k, want := range map[string]string{
		"X-Request-Id":  "req-1",
		"Traceparent":   "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"Authorization": "Bearer sk-test",
		"X-Probe":       "yes",
		"Accept":        wantAccept,
		"Content-Type":  "application/json",
	} {
		if got.header.Get(k) != want {
			t.Errorf("header %s = %q, want %q", k, got.header.Get(k), want)
		}
	}
	if !json.Valid([]byte(got.body)) {
		t.Fatalf("body is not JSON: %s", got.body)
	}
	for _, k := range bodyKeys {
		if !strings.Contains(got.body, k) {
			t.Errorf("body %s lacks %s", got.body, k)
		}
	}
}

// checkSecondWireRequest checks that a second request reuses the
// connection (no dns/connect time) and, without an intended time, has no
// scheduling lag.
func checkSecondWireRequest(t *testing.T, c *Client) {
	t.Helper()
	// A second request reuses the connection: no dns/connect time.
	rec2 := c.Do(context.Background(), wireSpec("req-2", 5))
	if rec2.Outcome != event.OutcomeOK {
		t.Fatalf("second request: %s: %s", rec2.Outcome, rec2.Error)
	}
	checkWireTimeline(t, rec2)
	if !rec2.ReusedConn || rec2.ConnectRTT != 0 {
		t.Errorf("second request: reused %v, connect RTT %v", rec2.ReusedConn, rec2.ConnectRTT)
	}
	if rec2.SchedLag != 0 || rec2.Stages[0].Stage != event.StageSerialize {
		t.Errorf("second request without Intended: lag %v, stages %+v", rec2.SchedLag, rec2.Stages)
	}
}

// checkFlags checks that rec carries exactly the flags want.
func checkFlags(t *testing.T, rec *event.Request, want []event.Flag) {
	t.Helper()
	if len(rec.Flags) != len(want) {
		t.Errorf("flags %v, want %v", rec.Flags, want)
	}
	for _, f := range want {
		if !rec.HasFlag(f) {
			t.Errorf("flags %v, want %v", rec.Flags, want)
		}
	}
}

// tgiWireFrames writes events the way TGI does: "data:" without a space.
func tgiWireFrames(payloads ...string) []wireFrame {
	out := make([]wireFrame, len(payloads))
	for i, p := range payloads {
		out[i] = wireFrame{data: "data:" + p + "\n\n"}
	}
	return out
}

func TestCoalescedEventsShareABatch(t *testing.T) {
	t.Parallel()
	three := strings.Repeat("data: "+vllmContentChunk+"\n\n", 3)
	frames := []wireFrame{{data: three}, {delay: 5 * time.Millisecond, data: "data: " + vllmContentChunk + "\n\ndata: [DONE]\n\n"}}
	srv := newWireServer(t, wireStream("text/event-stream", frames))
	c := newWireClient(t, srv.URL, DialectOpenAIChat, nil)
	rec := c.Do(context.Background(), wireSpec("b", 4))
	if rec.Outcome != event.OutcomeOK || len(rec.Chunks) != 4 {
		t.Fatalf("outcome %s (%s), %d chunks", rec.Outcome, rec.Error, len(rec.Chunks))
	}
	// Three events in the first read, the fourth and [DONE] in a second
	// one 5 ms later; a host too slow to read before the second frame came
	// gets all five in one read, and then they share one batch of five.
	wants := []int32{3, 3, 3, 2}
	if rec.Chunks[3].At == rec.Chunks[0].At {
		wants = []int32{5, 5, 5, 5}
	}
	for i, want := range wants {
		if rec.Chunks[i].Batch != want {
			t.Errorf("chunk %d batch %d, want %d (%+v)", i, rec.Chunks[i].Batch, want, rec.Chunks)
		}
	}
	if rec.Chunks[0].At != rec.Chunks[2].At {
		t.Errorf("coalesced chunks have different arrival times: %+v", rec.Chunks)
	}
	if !rec.HasFlag(event.FlagMissingUsage) {
		t.Errorf("flags %v: usage was asked for and never came", rec.Flags)
	}
}

func TestSplitUTF8IsCounted(t *testing.T) {
	t.Parallel()
	// A naive detokenizer splits "中" (e4 b8 ad) over two chunks: raw invalid
	// bytes, and another server's "\ufffd".
	chunks := []string{
		"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\xe4\xb8\"},\"finish_reason\":null}]}",
		"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\xad\"},\"finish_reason\":null}]}",
		`{"choices":[{"index":0,"delta":{"content":"\ufffd ok"},"finish_reason":null}]}`,
		`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3}}`,
		"[DONE]",
	}
	srv := newWireServer(t, wireStream("text/event-stream", sseFrames(chunks...)))
	c := newWireClient(t, srv.URL, DialectOpenAIChat, nil)
	rec := c.Do(context.Background(), wireSpec("u", 3))
	if rec.Outcome != event.OutcomeOK {
		t.Fatalf("outcome %s: %s", rec.Outcome, rec.Error)
	}
	if rec.ReplacementChars != 4 || !rec.HasFlag(event.FlagUTF8Defect) {
		t.Errorf("replacements %d, flags %v; want 4 and utf8_defect", rec.ReplacementChars, rec.Flags)
	}
}

func TestTGIHeaderTimings(t *testing.T) {
	t.Parallel()
	h := func(w http.ResponseWriter, r *http.Request) {
		for k, v := range map[string]string{"X-Validation-Time": "2", "X-Queue-Time": "15", "X-Inference-Time": "120",
			"X-Total-Time": "140", "X-Prompt-Tokens": "9", "X-Generated-Tokens": "2"} {
			w.Header().Set(k, v)
		}
		wireStream("text/event-stream", tgiWireFrames(tgiToken, tgiFinal))(w, r)
	}
	srv := newWireServer(t, h)
	c := newWireClient(t, srv.URL, DialectTGI, nil)
	rec := c.Do(context.Background(), wireSpec("h", 2))
	if rec.Outcome != event.OutcomeOK || rec.Server == nil {
		t.Fatalf("outcome %s (%s), server %+v", rec.Outcome, rec.Error, rec.Server)
	}
	want := map[event.Stage]time.Duration{event.StageTokenize: 2 * time.Millisecond, event.StageQueue: 15 * time.Millisecond,
		event.StageInference: 120 * time.Millisecond, event.StageServerE2E: 140 * time.Millisecond}
	for k, v := range want {
		if rec.Server.Stages[k] != v {
			t.Errorf("%s = %v, want %v", k, rec.Server.Stages[k], v)
		}
	}
	if rec.Server.Source != "tgi.headers" || rec.Server.PromptTokens != 9 {
		t.Errorf("server timing %+v", rec.Server)
	}
}

func TestNewClientValidates(t *testing.T) {
	t.Parallel()
	bad := []ClientConfig{
		{BaseURL: "http://127.0.0.1:1", Dialect: "nope"},
		{BaseURL: "127.0.0.1:8000", Dialect: DialectOpenAIChat},
		{BaseURL: "ftp://x", Dialect: DialectOpenAIChat},
		{BaseURL: "http://x?q=1", Dialect: DialectOpenAIChat},
		{BaseURL: "http://x", Dialect: DialectOllamaChat}, // no model
		{BaseURL: "http://x", Dialect: DialectTGI, Timeout: -1},
		{BaseURL: "http://x", Dialect: DialectTGI, MaxEventBytes: MaxEventBytesLimit + 1},
		{BaseURL: "http://x", Dialect: DialectTGI, Headers: http.Header{"X-Api-Key": {"sk-bad\nsecret"}}},
		{BaseURL: "http://x", Dialect: DialectTGI, Headers: http.Header{"Bad Name": {"v"}}},
		{BaseURL: "http://x", Dialect: DialectTGI, APIKey: "sk-bad\rsecret"},
		{BaseURL: "http://user:pw-secret@[::1", Dialect: DialectTGI},
	}
	for _, cfg := range bad {
		_, err := NewClient(cfg)
		if err == nil {
			t.Errorf("%+v: no error", cfg)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("error %q shows a secret", err)
		}
	}
	c, err := NewClient(ClientConfig{BaseURL: "http://127.0.0.1:8000/v1/", Dialect: DialectOpenAIChat})
	if err != nil {
		t.Fatal(err)
	}
	if c.url != "http://127.0.0.1:8000/v1/chat/completions" {
		t.Errorf("url %s", c.url)
	}
}

// wireOutcomeCase is one way a request can end, from a real misbehaving server.
type wireOutcomeCase struct {
	name    string
	handler http.HandlerFunc // nil: a refused port
	tls     bool             // serve over TLS with a certificate the client does not trust
	dialect string
	mod     func(*ClientConfig)
	ctx     func() (context.Context, context.CancelFunc)
	want    event.Outcome
	status  int
	errHas  string
	chunks  int // content chunks in the record; -1: 0 or 1
}

func wireOutcomeCases() []wireOutcomeCase {
	content := "data: " + vllmContentChunk + "\n\n"
	big := `{"choices":[{"delta":{"content":"` + strings.Repeat("x", DefaultMaxEventBytes) + `"}}]}`
	// The reset and the cancellation happen once the client holds the
	// first event, so it is always in the record, however busy the machine.
	read := make(chan struct{})
	cancelled, cancel := context.WithCancel(context.Background())
	return []wireOutcomeCase{
		{name: "refused", want: event.OutcomeConnect, errHas: "connection refused by 127.0.0.1:"},
		{name: "tls untrusted", tls: true, handler: wireStream("text/event-stream", sseFrames("[DONE]")),
			want: event.OutcomeConnect, errHas: "certificate"},
		{name: "429", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":{"message":"rate limit reached","type":"rate_limit_error"}}`))
		}, want: event.OutcomeHTTPStatus, status: 429, errHas: "rate limit reached"},
		{name: "500 text", handler: func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "internal failure in the engine", http.StatusInternalServerError)
		}, want: event.OutcomeHTTPStatus, status: 500, errHas: "internal failure"},
		{name: "503 ollama busy", dialect: DialectOllamaGenerate, handler: func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"server busy, please try again.  maximum pending requests exceeded"}`))
		}, want: event.OutcomeHTTPStatus, status: 503, errHas: "server busy"},
		{name: "reset mid-stream", handler: wireHijackReset(content, read), mod: onFirstRead(func() { close(read) }),
			want: event.OutcomeStreamReset, chunks: 1},
		{name: "closed without [DONE]", handler: wireStream("text/event-stream", sseFrames(vllmContentChunk, vllmContentChunk)),
			want: event.OutcomeStreamReset, errHas: "before data: [DONE]", chunks: 2},
		{name: "llama.cpp closed without stop", dialect: DialectLlamaCpp, handler: wireStream("text/event-stream", sseFrames(llamaPartial)),
			want: event.OutcomeStreamReset, errHas: `"stop": true`, chunks: 1},
		{name: "ollama line cut off", dialect: DialectOllamaGenerate, handler: wireStream("application/x-ndjson",
			[]wireFrame{{data: ollamaGenToken + "\n"}, {data: `{"model":"m","resp`}}), want: event.OutcomeStreamReset, chunks: 1},
		{name: "malformed chunk", handler: wireStream("text/event-stream", sseFrames(vllmContentChunk, `{"choices":[{"delta":{"content":"a`, "[DONE]")),
			want: event.OutcomeMalformed, errHas: "malformed", chunks: 1},
		{name: "json instead of stream", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"choices":[{"message":{"content":"hi"}}]}`))
		}, want: event.OutcomeMalformed, errHas: "not an event stream"},
		{name: "html page", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write([]byte("<html>\n<title>Sign in</title>\n</html>"))
		}, want: event.OutcomeMalformed, errHas: "HTML page, not a stream (a proxy, login or error page?): <html> <title>Sign in"},
		{name: "empty 200", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
		}, want: event.OutcomeMalformed, errHas: "server answered 200 without a single stream event (0 bytes of body)"},
		{name: "plain text 200", handler: func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("hello\n"))
		}, want: event.OutcomeMalformed, errHas: "without a single stream event (6 bytes of body)"},
		{name: "gzip stream", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write([]byte("\x1f\x8b\x08\x00\x00\x00\x00\x00"))
		}, want: event.OutcomeMalformed, errHas: "compressed the stream (Content-Encoding: gzip)"},
		{name: "key echoed in an error", mod: func(c *ClientConfig) { c.APIKey = "sk-secret-123" }, handler: func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "invalid key "+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), http.StatusUnauthorized)
		}, want: event.OutcomeHTTPStatus, status: 401, errHas: "http 401: invalid key REDACTED"},
		{name: "oversized event", handler: wireStream("text/event-stream", sseFrames(vllmContentChunk, big, "[DONE]")),
			want: event.OutcomeOversized, errHas: "event exceeds 1048576 bytes", chunks: 1},
		{name: "oversized with a small limit", mod: func(c *ClientConfig) { c.MaxEventBytes = 100 },
			handler: wireStream("text/event-stream", sseFrames(vllmContentChunk)), want: event.OutcomeOversized, errHas: "event exceeds 100 bytes"},
		{name: "error event", handler: wireStream("text/event-stream", sseFrames(vllmContentChunk,
			`{"error":{"message":"CUDA out of memory","type":"InternalServerError","code":500}}`)),
			want: event.OutcomeServerError, errHas: "CUDA out of memory", chunks: 1},
		{name: "cancelled", handler: wireBlockUntilGone(content), mod: onFirstRead(cancel),
			ctx: func() (context.Context, context.CancelFunc) { return cancelled, cancel }, want: event.OutcomeCancelled, chunks: 1},
		// Whether the first event beats a timer depends on the machine:
		// these cases hold at most it (chunks -1).
		{name: "request timeout", handler: wireBlockUntilGone(content), mod: func(c *ClientConfig) { c.Timeout = 150 * time.Millisecond },
			want: event.OutcomeTimeout, errHas: "request timeout", chunks: -1},
		{name: "caller deadline", handler: wireBlockUntilGone(content), ctx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 150*time.Millisecond)
		}, want: event.OutcomeTimeout, chunks: -1},
		{name: "timeout before headers", handler: func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		}, mod: func(c *ClientConfig) { c.Timeout = 150 * time.Millisecond }, want: event.OutcomeTimeout},
	}
}

// runWireOutcome runs one case against its own server and returns the record.
func runWireOutcome(t *testing.T, tc wireOutcomeCase) *event.Request {
	t.Helper()
	url := ""
	if tc.handler == nil {
		url = "http://" + refusedAddr
	} else if tc.tls {
		srv := httptest.NewUnstartedServer(tc.handler)
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshake is the point
		srv.StartTLS()
		t.Cleanup(srv.Close)
		url = srv.URL
	} else {
		url = newWireServer(t, tc.handler).URL
	}
	dialect := tc.dialect
	if dialect == "" {
		dialect = DialectOpenAIChat
	}
	c := newWireClient(t, url, dialect, tc.mod)
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if tc.ctx != nil {
		ctx, cancel = tc.ctx()
	}
	defer cancel()
	return c.Do(ctx, wireSpec("o", 8))
}

func TestOutcomes(t *testing.T) {
	t.Parallel()
	for _, tc := range wireOutcomeCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := runWireOutcome(t, tc)
			if rec.Outcome != tc.want {
				t.Fatalf("outcome %s (%s), want %s", rec.Outcome, rec.Error, tc.want)
			}
			if tc.status != 0 && rec.Status != tc.status {
				t.Errorf("status %d, want %d", rec.Status, tc.status)
			}
			if !strings.Contains(rec.Error, tc.errHas) || rec.Error == "" {
				t.Errorf("error %q, want it to mention %q", rec.Error, tc.errHas)
			}
			if strings.Contains(rec.Error, "://") {
				t.Errorf("error %q names a URL: it may carry credentials, and the cause is what matters", rec.Error)
			}
			if len(rec.Chunks) != tc.chunks && !(tc.chunks == -1 && len(rec.Chunks) <= 1) {
				t.Errorf("%d chunks, want %d", len(rec.Chunks), tc.chunks)
			}
			if rec.E2E <= 0 {
				t.Errorf("E2E %v", rec.E2E)
			}
			checkWireTimeline(t, rec)
		})
	}
}

// TestNoGoroutineLeft runs every outcome and a successful stream, then
// checks that nothing the client started is still running. It is not
// parallel: it counts the whole process's goroutines.
func TestNoGoroutineLeft(t *testing.T) {
	base := runtime.NumGoroutine()
	t.Run("all", func(t *testing.T) {
		for _, tc := range wireOutcomeCases() {
			if rec := runWireOutcome(t, tc); rec.Outcome != tc.want {
				t.Errorf("%s: outcome %s (%s)", tc.name, rec.Outcome, rec.Error)
			}
		}
		srv := newWireServer(t, wireStream("text/event-stream", sseFrames(vllmContentChunk, vllmUsageChunk, "[DONE]")))
		c := newWireClient(t, srv.URL, DialectOpenAIChat, nil)
		for i := 0; i < 5; i++ {
			if rec := c.Do(context.Background(), wireSpec("ok", 1)); !rec.OK() {
				t.Fatalf("outcome %s: %s", rec.Outcome, rec.Error)
			}
		}
	}) // the subtest's cleanups close servers and idle connections
	wireWaitGoroutines(t, base)
}

// BenchmarkDoLoopback streams a 1000-token vLLM-style response over
// loopback per op. "one-write" sends the body in one write (the client's
// parse loop dominates); "flush-per-token" flushes every event, as a real
// server does. B/token and allocs/token count every allocation in the
// process during the loop, the test server's included, so they are upper
// bounds for the client.
func BenchmarkDoLoopback(b *testing.B) {
	const tokens = 1000
	var sb strings.Builder
	events := []string{"data: " + vllmRoleChunk + "\n\n"}
	for range tokens {
		events = append(events, "data: "+vllmContentChunk+"\n\n")
	}
	events = append(events, "data: "+vllmUsageChunk+"\n\n", "data: [DONE]\n\n")
	for _, e := range events {
		sb.WriteString(e)
	}
	whole := sb.String()
	for _, mode := range []struct {
		name     string
		perToken bool
	}{{"one-write", false}, {"flush-per-token", true}} {
		b.Run(mode.name, func(b *testing.B) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				if !mode.perToken {
					_, _ = io.WriteString(w, whole)
					return
				}
				fl := w.(http.Flusher)
				for _, e := range events {
					_, _ = io.WriteString(w, e)
					fl.Flush()
				}
			}))
			defer srv.Close()
			c := newWireClient(b, srv.URL, DialectOpenAIChat, nil)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			for b.Loop() {
				rec := c.Do(context.Background(), wireSpec("bench", tokens))
				if !rec.OK() || len(rec.Chunks) != tokens {
					b.Fatalf("outcome %s (%s), %d chunks", rec.Outcome, rec.Error, len(rec.Chunks))
				}
			}
			b.StopTimer()
			runtime.ReadMemStats(&after)
			n := float64(b.N * tokens)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/token")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "B/token")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "allocs/token")
		})
	}
}

// TestEndlessStreamIsBounded: a server that streams content forever without
// its end marker ends the request once the stream passes its token limit,
// long before the request timeout, and the record keeps no more chunks
// than that limit.
func TestEndlessStreamIsBounded(t *testing.T) {
	t.Parallel()
	batch := strings.Repeat("data: "+vllmContentChunk+"\n\n", 512)
	srv := newWireServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for r.Context().Err() == nil {
			if _, err := io.WriteString(w, batch); err != nil {
				return
			}
			fl.Flush()
		}
	})
	c := newWireClient(t, srv.URL, DialectOpenAIChat, func(cfg *ClientConfig) { cfg.Timeout = time.Minute })
	rec := c.Do(t.Context(), wireSpec("endless", 8))
	limit := tokenLimit(8)
	if rec.Outcome != event.OutcomeMalformed || !strings.Contains(rec.Error, fmt.Sprintf("more than %d tokens without ending the stream", limit)) {
		t.Fatalf("outcome %s (%s), want malformed: more than %d tokens", rec.Outcome, rec.Error, limit)
	}
	if len(rec.Chunks) > limit || cap(rec.Chunks) > 2*limit || rec.OutputTokens > limit {
		t.Errorf("record holds %d chunks (capacity %d) and %d tokens, want at most %d", len(rec.Chunks), cap(rec.Chunks), rec.OutputTokens, limit)
	}
	checkWireTimeline(t, rec)
}

func TestTokenLimit(t *testing.T) {
	t.Parallel()
	for asked, want := range map[int]int{-1: minTokenLimit, 0: minTokenLimit, 128: minTokenLimit, 100_000: 400_000, 1 << 40: 4 * maxTokenLength} {
		if got := tokenLimit(asked); got != want {
			t.Errorf("tokenLimit(%d) = %d, want %d", asked, got, want)
		}
	}
}

func TestStreamWithoutContentIsFlagged(t *testing.T) {
	t.Parallel()
	srv := newWireServer(t, wireStream("text/event-stream", sseFrames(vllmRoleChunk, vllmFinishChunk, vllmUsageChunk, "[DONE]")))
	c := newWireClient(t, srv.URL, DialectOpenAIChat, nil)
	rec := c.Do(t.Context(), wireSpec("empty", 8))
	if !rec.OK() || !rec.HasFlag(event.FlagNoContent) || len(rec.Chunks) != 0 {
		t.Fatalf("outcome %s, flags %v, %d chunks: want ok, flagged no_content", rec.Outcome, rec.Flags, len(rec.Chunks))
	}
	full := newWireServer(t, wireStream("text/event-stream", sseFrames(vllmContentChunk, vllmUsageChunk, "[DONE]")))
	if rec := newWireClient(t, full.URL, DialectOpenAIChat, nil).Do(t.Context(), wireSpec("full", 1)); rec.HasFlag(event.FlagNoContent) {
		t.Fatalf("a stream with content flagged %v", rec.Flags)
	}
}

// TestRedirectStaysOnTheHost: credentials never follow a redirect to another
// host; a redirect within the host is followed.
func TestRedirectStaysOnTheHost(t *testing.T) {
	t.Parallel()
	elsewhere := newWireServer(t, wireStream("text/event-stream", sseFrames(vllmContentChunk, "[DONE]")))
	srv := newWireServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" && r.URL.Query().Get("here") == "" {
			target := "/v1/chat/completions?here=1"
			if r.Header.Get("X-Go") == "away" {
				target = elsewhere.URL + r.URL.Path
			}
			http.Redirect(w, r, target, http.StatusTemporaryRedirect)
			return
		}
		wireStream("text/event-stream", sseFrames(vllmContentChunk, "[DONE]"))(w, r)
	})
	for _, tc := range []struct {
		name    string
		away    bool
		want    event.Outcome
		wantErr string
	}{
		{"same host", false, event.OutcomeOK, ""},
		{"another host", true, event.OutcomeHTTPStatus, "http 307: the server redirected to " + elsewhere.URL},
	} {
		h := http.Header{"X-Api-Key": {"hdr-secret-1"}}
		if tc.away {
			h.Set("X-Go", "away")
		}
		c := newWireClient(t, srv.URL, DialectOpenAIChat, func(cfg *ClientConfig) { cfg.APIKey, cfg.Headers = "sk-secret-2", h })
		rec := c.Do(t.Context(), wireSpec(tc.name, 1))
		if rec.Outcome != tc.want || !strings.Contains(rec.Error, tc.wantErr) {
			t.Errorf("%s: outcome %s (%s), want %s %q", tc.name, rec.Outcome, rec.Error, tc.want, tc.wantErr)
		}
	}
	if got := elsewhere.requests(); len(got) != 0 {
		t.Fatalf("the other host received %d requests (headers %v): credentials followed the redirect", len(got), got[0].header)
	}
}

func TestCredentialsInTheURLStayOutOfTheRecord(t *testing.T) {
	t.Parallel()
	srv := newWireServer(t, wireStream("text/event-stream", sseFrames(vllmContentChunk, "[DONE]")))
	withCreds := strings.Replace(srv.URL, "://", "://user:pw-secret-3@", 1)
	rec := newWireClient(t, withCreds, DialectOpenAIChat, nil).Do(t.Context(), wireSpec("creds", 1))
	if !rec.OK() || strings.Contains(rec.Target, "pw-secret-3") {
		t.Fatalf("outcome %s (%s), target %q: want ok and no password", rec.Outcome, rec.Error, rec.Target)
	}
	if got := srv.requests()[0].header.Get("Authorization"); !strings.HasPrefix(got, "Basic ") {
		t.Errorf("Authorization %q: the URL's credentials should still be sent, as basic auth", got)
	}
	refused := "http://user:pw-secret-3@" + refusedAddr
	rec = newWireClient(t, refused, DialectOpenAIChat, nil).Do(t.Context(), wireSpec("refused", 1))
	if rec.Outcome != event.OutcomeConnect || strings.Contains(rec.Error+rec.Target, "pw-secret-3") || strings.Contains(rec.Error+rec.Target, "user") {
		t.Fatalf("outcome %s, error %q, target %q: want connect with no credentials shown", rec.Outcome, rec.Error, rec.Target)
	}
}

// TestImplausibleServerNumbersAreDropped: a usage count of 2^63-1 (which
// made throughput negative), a negative prompt count and absurd server
// timings are ignored; the probe's own counts stand.
func TestImplausibleServerNumbersAreDropped(t *testing.T) {
	t.Parallel()
	usage := `{"choices":[],"usage":{"prompt_tokens":-5,"completion_tokens":9223372036854775807},` +
		`"metrics":{"queue_time_ms":1e300,"time_to_first_token_ms":-3,"generation_time_ms":12.5}}`
	srv := newWireServer(t, wireStream("text/event-stream", sseFrames(vllmContentChunk, vllmContentChunk, vllmContentChunk, usage, "[DONE]")))
	rec := newWireClient(t, srv.URL, DialectOpenAIChat, nil).Do(t.Context(), wireSpec("bogus", 3))
	if !rec.OK() || rec.OutputTokens != 3 || rec.PromptTokens != 9 {
		t.Fatalf("outcome %s, output %d, prompt %d: want ok with the counted 3 and the target 9", rec.Outcome, rec.OutputTokens, rec.PromptTokens)
	}
	if tps := rec.TokensPerSecond(); !(tps > 0) {
		t.Errorf("tokens per second %v, want positive", tps)
	}
	if st := rec.Server; st == nil || len(st.Stages) != 1 || st.Stages[event.StageDecode] != 12500*time.Microsecond {
		t.Errorf("server timing %+v: want only the plausible decode stage", st)
	}
}

// staleKeepAliveServer answers the first request on each connection with a
// whole stream and keeps the connection open, and closes the connection,
// without answering, when a second request arrives on it: a keep-alive
// timeout firing just as the request came. The first `together`
// connections' first requests are answered only once all of them have
// arrived, so that many connections are open at once.
func staleKeepAliveServer(t *testing.T, together int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	body := "data: " + vllmContentChunk + "\n\ndata: [DONE]\n\n"
	var wg sync.WaitGroup
	var arrived sync.WaitGroup
	arrived.Add(together)
	var firsts atomic.Int64
	serve := func(conn net.Conn) {
		defer conn.Close()
		br := bufio.NewReader(conn)
		for i := 0; ; i++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			if i > 0 {
				return // the stale connection
			}
			if firsts.Add(1) <= int64(together) {
				arrived.Done()
				arrived.Wait()
			}
			fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		}
	}
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { serve(conn) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	return "http://" + ln.Addr().String()
}

// TestStaleConnectionIsReconnected: a request that went out on a keep-alive
// connection the server had just closed is sent again, once, on a fresh
// one, and the Runner counts it; the record stays whole.
func TestStaleConnectionIsReconnected(t *testing.T) {
	t.Parallel()
	c := newWireClient(t, staleKeepAliveServer(t, 1), DialectOpenAIChat, nil)
	if rec := c.Do(t.Context(), wireSpec("first", 1)); !rec.OK() {
		t.Fatalf("first request: %s (%s)", rec.Outcome, rec.Error)
	}
	rec, noted := c.doNoted(t.Context(), wireSpec("second", 1))
	if !rec.OK() || !noted.reconnected || rec.ReusedConn || rec.ConnectRTT <= 0 {
		t.Fatalf("second request: %s (%s), reconnected %v, reused %v, connect RTT %v: want ok on a fresh connection",
			rec.Outcome, rec.Error, noted.reconnected, rec.ReusedConn, rec.ConnectRTT)
	}
	checkWireTimeline(t, rec)

	// Through the Runner, one worker: a request that goes out on the
	// connection the previous one left finds it stale; a retry's new
	// connection is closed after it, so the request after a retry dials.
	// Of 4 requests, the 2nd and the 4th are sent again.
	st, col, _, r := runPaused(t, newWireClient(t, staleKeepAliveServer(t, 1), DialectOpenAIChat, nil), LoadConfig{Concurrency: 1, Requests: 4})
	if st.OK != 4 || st.Reconnects != 2 || r.probeSample(time.Now()).Reconnects != 2 {
		t.Fatalf("stats %+v: want 4 ok and 2 reconnects", st)
	}
	// The last probe sample, sent when the run ends, has the final count.
	if col.probe == nil || col.probe.Reconnects != 2 {
		t.Errorf("last probe sample %+v: want 2 reconnects", col.probe)
	}
}

// TestStaleRetryTakesANewConnection: with two stale connections in the
// pool, the one retry goes out on a new connection, not on the other stale
// one (which would fail it as a false error).
func TestStaleRetryTakesANewConnection(t *testing.T) {
	t.Parallel()
	c := newWireClient(t, staleKeepAliveServer(t, 2), DialectOpenAIChat, nil)
	var wg sync.WaitGroup
	for i := range 2 { // two connections, both answered once both requests arrived
		wg.Go(func() {
			if rec := c.Do(t.Context(), wireSpec(fmt.Sprintf("first-%d", i), 1)); !rec.OK() {
				t.Errorf("first request %d: %s (%s)", i, rec.Outcome, rec.Error)
			}
		})
	}
	wg.Wait()
	rec, noted := c.doNoted(t.Context(), wireSpec("third", 1))
	if !rec.OK() || !noted.reconnected || rec.ReusedConn {
		t.Fatalf("third request: %s (%s), reconnected %v, reused %v: want ok on a new connection after one stale one",
			rec.Outcome, rec.Error, noted.reconnected, rec.ReusedConn)
	}
}

// TestPromptCachedFlag checks that the cached prompt tokens a server reports
// (OpenAI usage.prompt_tokens_details.cached_tokens, llama.cpp
// timings.cache_n) reach the record, and that a request is flagged
// prompt_cached from half of its prompt cached on.
func TestPromptCachedFlag(t *testing.T) {
	t.Parallel()
	openAI := func(cached int) string {
		return fmt.Sprintf(`{"choices":[],"usage":{"prompt_tokens":512,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":%d}}}`, cached)
	}
	llama := func(cached int) string {
		return fmt.Sprintf(`{"content":"","stop":true,"tokens_predicted":1,"tokens_evaluated":512,"timings":{"cache_n":%d,"prompt_n":%d,"prompt_ms":5.1,"predicted_n":1,"predicted_ms":4}}`, cached, 512-cached)
	}
	for _, tc := range []struct {
		name, dialect string
		frames        []string
		cached        int
		flagged       bool
		source        string
	}{
		{"openai mostly cached", DialectOpenAIChat, []string{vllmContentChunk, openAI(496), "[DONE]"}, 496, true, "usage"},
		{"openai half cached", DialectOpenAIChat, []string{vllmContentChunk, openAI(256), "[DONE]"}, 256, true, "usage"},
		{"openai little cached", DialectOpenAIChat, []string{vllmContentChunk, openAI(16), "[DONE]"}, 16, false, "usage"},
		{"openai none cached", DialectOpenAIChat, []string{vllmContentChunk, openAI(0), "[DONE]"}, 0, false, ""},
		{"llama.cpp mostly cached", DialectLlamaCpp, []string{llamaPartial, llama(511)}, 511, true, "llamacpp.timings"},
		{"llama.cpp BOS only", DialectLlamaCpp, []string{llamaPartial, llama(1)}, 1, false, "llamacpp.timings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newWireServer(t, wireStream("text/event-stream", sseFrames(tc.frames...)))
			rec := newWireClient(t, srv.URL, tc.dialect, nil).Do(context.Background(), wireSpec("pc", 1))
			if !rec.OK() {
				t.Fatalf("outcome %s (%s)", rec.Outcome, rec.Error)
			}
			var cached int
			var source string
			if rec.Server != nil {
				cached, source = rec.Server.CachedTokens, rec.Server.Source
			}
			if cached != tc.cached || source != tc.source {
				t.Errorf("server timing %+v: cached %d from %q, want %d from %q", rec.Server, cached, source, tc.cached, tc.source)
			}
			if got := rec.HasFlag(event.FlagPromptCached); got != tc.flagged {
				t.Errorf("flags %v: prompt_cached %t, want %t", rec.Flags, got, tc.flagged)
			}
		})
	}
}
