package probe

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// Events as Anthropic writes them (vLLM's differ in usage: input_tokens is
// the whole prompt, output_tokens 0 at the start, no cache fields).
const (
	anthStart     = `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-x","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":100,"cache_read_input_tokens":400,"output_tokens":1}}}`
	anthPing      = `{"type": "ping"}`
	anthThinkOpen = `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`
	anthThink     = `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me think"}}`
	anthSignature = `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3h"}}`
	anthStop0     = `{"type":"content_block_stop","index":0}`
	anthTextOpen  = `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`
	anthText      = `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":" Paris"}}`
	anthStop1     = `{"type":"content_block_stop","index":1}`
	anthMsgDelta  = `{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":64}}`
	anthMsgStop   = `{"type":"message_stop"}`
	anthOverload  = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
)

func TestParseAnthropicEvents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data string
		want chunkInfo
	}{
		{"message_start", anthStart, chunkInfo{usage: true, promptTokens: 512, cachedTokens: 400}},
		{"vllm message_start", `{"type":"message_start","message":{"id":"chatcmpl-1","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":0}}}`,
			chunkInfo{usage: true, promptTokens: 9}},
		{"ping", anthPing, chunkInfo{}},
		{"thinking block", anthThinkOpen, chunkInfo{}},
		{"thinking", anthThink, chunkInfo{tokens: 1, reasoning: true}},
		{"signature", anthSignature, chunkInfo{}},
		{"block stop", anthStop0, chunkInfo{}},
		{"text block", anthTextOpen, chunkInfo{}},
		{"text", anthText, chunkInfo{tokens: 1}},
		{"text, keys reordered", `{"index":1,"delta":{"text":" Paris","type":"text_delta"},"type":"content_block_delta"}`, chunkInfo{tokens: 1}},
		{"text, spaced", `{"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": " Paris"}}`, chunkInfo{tokens: 1}},
		{"empty text", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":""}}`, chunkInfo{}},
		{"text with fffd", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"caf\ufffd"}}`, chunkInfo{tokens: 1, replacements: 1}},
		{"escaped delta type", `{"type":"content_block_delta","index":1,"delta":{"type":"text\u005fdelta","text":"a"}}`, chunkInfo{tokens: 1}},
		{"tool block", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{}}}`, chunkInfo{}},
		{"tool input", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\": \"San Fra"}}`, chunkInfo{}},
		{"citation", `{"type":"content_block_delta","index":1,"delta":{"type":"citations_delta","citation":{"type":"char_location","cited_text":"x"}}}`, chunkInfo{}},
		{"redacted thinking", `{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"}}`, chunkInfo{tokens: 1, reasoning: true}},
		{"text in its block's start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"Hi"}}`, chunkInfo{tokens: 1}},
		{"message_delta", anthMsgDelta, chunkInfo{usage: true, outputTokens: 64}},
		{"message_delta, cumulative usage", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":12,"cache_read_input_tokens":400,"output_tokens":64}}`,
			chunkInfo{usage: true, promptTokens: 412, cachedTokens: 400, outputTokens: 64}},
		{"message_stop", anthMsgStop, chunkInfo{end: true}},
		{"unknown event", `{"type":"message_annotation","what":1}`, chunkInfo{}},
		{"error event", anthOverload, chunkInfo{serverErr: "overloaded_error: Overloaded"}},
		{"error without a message", `{"type":"error"}`, chunkInfo{serverErr: "error event without a message"}},
		{"openai-style error", `{"error":{"message":"CUDA out of memory"}}`, chunkInfo{serverErr: "CUDA out of memory"}},
		{"error inside a delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"},"error":{"type":"api_error","message":"boom"}}`,
			chunkInfo{serverErr: "api_error: boom"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got chunkInfo
			if err := (anthropicDialect{}).parse([]byte(tt.data), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(infoOf(got), infoOf(tt.want)) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseAnthropicMalformed(t *testing.T) {
	t.Parallel()
	for _, data := range []string{
		`not json`,
		``,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":5}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"bad \x escape"}}`,
		`{"type":"message_start","message":{"usage":{"input_tokens":"many"}}}`,
		`{"type":7}`,
		`{"index":0}`,
		`{"type":"content_block_delta",}`,
		`[1,2]`,
	} {
		var got chunkInfo
		if err := (anthropicDialect{}).parse([]byte(data), &got); !errors.Is(err, errMalformed) {
			t.Errorf("%q: err %v, want malformed", data, err)
		}
	}
}

// The request: POST /v1/messages (a base URL ending /v1 too), the key as
// x-api-key and never as a bearer token, anthropic-version (a --header
// replaces it), and the body the API wants.
func TestAnthropicRequest(t *testing.T) {
	t.Parallel()
	srv := newWireServer(t, wireStream("text/event-stream", anthropicFrames(anthStart, anthTextOpen, anthText, anthStop1, anthMsgDelta, anthMsgStop)))
	c := newWireClient(t, srv.URL+"/v1", DialectAnthropicMessages, func(cfg *ClientConfig) {
		cfg.APIKey = "sk-ant-secret-key"
		cfg.Headers = http.Header{"Anthropic-Beta": {"x"}}
	})
	if rec := c.Do(t.Context(), wireSpec("a1", 64)); !rec.OK() {
		t.Fatalf("outcome %s: %s", rec.Outcome, rec.Error)
	}
	c2 := newWireClient(t, srv.URL, DialectAnthropicMessages, func(cfg *ClientConfig) {
		cfg.Headers = http.Header{"Anthropic-Version": {"2099-01-01"}}
	})
	if rec := c2.Do(t.Context(), wireSpec("a2", 0)); !rec.OK() {
		t.Fatalf("outcome %s: %s", rec.Outcome, rec.Error)
	}
	seen := srv.requests()
	if len(seen) != 2 {
		t.Fatalf("%d requests", len(seen))
	}
	r := seen[0]
	if r.path != "/v1/messages" || r.header.Get("X-Api-Key") != "sk-ant-secret-key" || r.header.Get("Authorization") != "" ||
		r.header.Get("Anthropic-Version") != anthropicVersion || r.header.Get("Anthropic-Beta") != "x" || r.header.Get("X-Request-Id") != "a1" {
		t.Errorf("request %s with headers %v", r.path, r.header)
	}
	var body struct {
		Model     string        `json:"model"`
		MaxTokens int           `json:"max_tokens"`
		Stream    bool          `json:"stream"`
		Messages  []chatMessage `json:"messages"`
	}
	if err := json.Unmarshal([]byte(r.body), &body); err != nil || body.Model != "m" || body.MaxTokens != 64 || !body.Stream ||
		len(body.Messages) != 1 || body.Messages[0].Role != "user" || body.Messages[0].Content != wireSpec("", 0).Prompt {
		t.Errorf("body %s (%v)", r.body, err)
	}
	if strings.Contains(r.body, "ignore_eos") || strings.Contains(r.body, "stream_options") {
		t.Errorf("body %s holds OpenAI's fields, which Anthropic refuses", r.body)
	}
	if got := seen[1]; got.header.Get("Anthropic-Version") != "2099-01-01" || !strings.Contains(got.body, `"max_tokens":1024`) {
		t.Errorf("second request: headers %v, body %s", got.header, got.body)
	}
}

// anthropicFrames writes each event as the API does: its name, then its data.
func anthropicFrames(payloads ...string) []wireFrame {
	out := make([]wireFrame, len(payloads))
	for i, p := range payloads {
		var typ struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal([]byte(p), &typ)
		out[i] = wireFrame{data: "event: " + typ.Type + "\ndata: " + p + "\n\n"}
	}
	return out
}

// A whole stream, byte for byte: thinking, then the answer. The thinking
// deltas are reasoning, the answer starts at the first text delta, the
// counts are the usage's (the prompt: fresh, cache-written and cache-read
// tokens together), and the ping and signature count as nothing.
func TestAnthropicStream(t *testing.T) {
	t.Parallel()
	frames := anthropicFrames(anthStart, anthPing, anthThinkOpen, anthThink, anthThink, anthSignature, anthStop0,
		anthTextOpen, anthText, anthPing, anthText, anthText, anthStop1, anthMsgDelta, anthMsgStop)
	srv := newWireServer(t, wireStream("text/event-stream", frames))
	rec := newWireClient(t, srv.URL, DialectAnthropicMessages, nil).Do(t.Context(), wireSpec("s1", 64))
	if !rec.OK() {
		t.Fatalf("outcome %s: %s", rec.Outcome, rec.Error)
	}
	if len(rec.Chunks) != 5 || rec.OutputTokens != 64 || rec.ReasoningTokens != 2 || rec.PromptTokens != 512 {
		t.Errorf("chunks %d, output %d, reasoning %d, prompt %d; want 5, 64, 2, 512",
			len(rec.Chunks), rec.OutputTokens, rec.ReasoningTokens, rec.PromptTokens)
	}
	if rec.Server == nil || rec.Server.CachedTokens != 400 || !rec.HasFlag(event.FlagPromptCached) || rec.HasFlag(event.FlagMissingUsage) {
		t.Errorf("server %+v, flags %v", rec.Server, rec.Flags)
	}
	// The answer began with the third chunk, after the two thinking deltas.
	if want := rec.SchedLag + max(rec.Chunks[2].At, rec.TTFT-rec.SchedLag); rec.TTFTAnswer != want {
		t.Errorf("ttft %v, answer %v (want %v), thinking %v", rec.TTFT, rec.TTFTAnswer, want, rec.Thinking())
	}
	if !rec.HasFlag(event.FlagRoleOnlyFirst) {
		t.Errorf("flags %v: message_start, the first event, carries no content", rec.Flags)
	}
}

// Failures: an error event mid-stream, an HTTP error with the API's JSON
// body (529 Overloaded with its Retry-After, 401), a stream that ends
// without message_stop, a broken event.
func TestAnthropicFailures(t *testing.T) {
	t.Parallel()
	errorBody := func(status int, retry, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if retry != "" {
				w.Header().Set("Retry-After", retry)
			}
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		}
	}
	tests := []struct {
		name    string
		h       http.HandlerFunc
		outcome event.Outcome
		msg     string
		retry   time.Duration
	}{
		{"error event", wireStream("text/event-stream", anthropicFrames(anthStart, anthTextOpen, anthText, anthOverload)),
			event.OutcomeServerError, "server error event: overloaded_error: Overloaded", 0},
		{"529", errorBody(529, "7", anthOverload), event.OutcomeHTTPStatus, "http 529: Overloaded", 7 * time.Second},
		{"401", errorBody(401, "", `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`),
			event.OutcomeHTTPStatus, "http 401: invalid x-api-key", 0},
		{"no message_stop", wireStream("text/event-stream", anthropicFrames(anthStart, anthTextOpen, anthText, anthMsgDelta)),
			event.OutcomeStreamReset, "stream ended before a message_stop event", 0},
		{"broken event", wireStream("text/event-stream", append(anthropicFrames(anthStart, anthText),
			wireFrame{data: "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" bro\n\n"})),
			event.OutcomeMalformed, "malformed chunk: anthropic-messages", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newWireServer(t, tt.h)
			rec, n := newWireClient(t, srv.URL, DialectAnthropicMessages, nil).doNoted(t.Context(), wireSpec("f", 8))
			if rec.Outcome != tt.outcome || !strings.Contains(rec.Error, tt.msg) || n.retryAfter != tt.retry {
				t.Errorf("outcome %s, error %q, retry after %v; want %s, %q, %v", rec.Outcome, rec.Error, n.retryAfter, tt.outcome, tt.msg, tt.retry)
			}
		})
	}
}

// anthropicShapeTemplates are content deltas (and events that are not)
// with their string cut out.
var anthropicShapeTemplates = []struct{ prefix, suffix string }{
	{`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":`, `}}`},
	{`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":`, `}}`},
	{`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":`, `}}`},
	{`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":`, `},"error":{"type":"api_error","message":"x"}}`},
	{`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":`, `}}`},
	{`{"index":1,"delta":{"text":`, `,"type":"text_delta"},"type":"content_block_delta"}`},
}

// FuzzAnthropicChunkShape checks that a stream's remembered delta shape
// never changes a result: after one event has been parsed, the next one,
// of the same shape or not, must parse as it does on its own.
func FuzzAnthropicChunkShape(f *testing.F) {
	f.Add(uint8(0), uint8(0), []byte(" Paris"), []byte(" London"), false)
	f.Add(uint8(1), uint8(0), []byte("hmm"), []byte("a"), false)
	f.Add(uint8(0), uint8(3), []byte("a"), []byte("b"), false)
	f.Add(uint8(0), uint8(0), []byte("a"), []byte("\xe4\xb8"), true)
	f.Add(uint8(0), uint8(0), []byte("a"), []byte(`\ud800x`), true)
	f.Fuzz(func(t *testing.T, first, second uint8, a, b []byte, raw bool) {
		build := func(which uint8, content []byte) []byte {
			tpl := anthropicShapeTemplates[int(which)%len(anthropicShapeTemplates)]
			var str []byte
			if raw {
				str = append(str, '"')
				for _, c := range content {
					if c != '"' && c != '\\' {
						str = append(str, c)
					}
				}
				str = append(str, '"')
			} else {
				str, _ = json.Marshal(string(content))
			}
			return append(append([]byte(tpl.prefix), str...), tpl.suffix...)
		}
		d := anthropicDialect{}
		var shape chunkShape
		var c0 chunkInfo
		_ = d.parseStream(build(first, a), &c0, &shape)
		next := build(second, b)
		var shaped, alone chunkInfo
		shapedErr := d.parseStream(next, &shaped, &shape)
		aloneErr := d.parse(next, &alone)
		if (shapedErr == nil) != (aloneErr == nil) || shapedErr != nil && !errors.Is(shapedErr, errMalformed) {
			t.Fatalf("%q: with shape err %v, alone err %v", next, shapedErr, aloneErr)
		}
		if !reflect.DeepEqual(infoOf(shaped), infoOf(alone)) || shaped.answerText() != alone.answerText() {
			t.Fatalf("%q:\nwith shape %+v\nalone      %+v", next, shaped, alone)
		}
	})
}

// BenchmarkParseAnthropicShaped is BenchmarkParseChunk's anthropic-messages
// case for the deltas after a block's first: the shape is remembered.
func BenchmarkParseAnthropicShaped(b *testing.B) {
	data := []byte(anthText)
	var shape chunkShape
	var c chunkInfo
	d := anthropicDialect{}
	if err := d.parseStream(data, &c, &shape); err != nil || !shape.ok {
		b.Fatalf("prime: %v", err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		c = chunkInfo{}
		if err := d.parseStream(data, &c, &shape); err != nil || c.tokens != 1 {
			b.Fatalf("parse: %v %+v", err, c)
		}
	}
}

// BenchmarkDoLoopbackAnthropic is BenchmarkDoLoopback's one-write case in
// the Messages API: a 1000-token answer in one write, so the client's parse
// loop dominates.
func BenchmarkDoLoopbackAnthropic(b *testing.B) {
	const tokens = 1000
	payloads := []string{anthStart, anthPing, anthTextOpen}
	for range tokens {
		payloads = append(payloads, anthText)
	}
	payloads = append(payloads, anthStop1, anthMsgDelta, anthMsgStop)
	var sb strings.Builder
	for _, f := range anthropicFrames(payloads...) {
		sb.WriteString(f.data)
	}
	whole := sb.String()
	srv := newWireServer(b, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, whole)
	})
	c := newWireClient(b, srv.URL, DialectAnthropicMessages, nil)
	b.ResetTimer()
	for b.Loop() {
		rec := c.Do(context.Background(), wireSpec("bench", tokens))
		if !rec.OK() || len(rec.Chunks) != tokens {
			b.Fatalf("outcome %s (%s), %d chunks", rec.Outcome, rec.Error, len(rec.Chunks))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*tokens), "ns/token")
}
