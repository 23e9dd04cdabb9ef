package probe

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// Chunks as the servers write them: vLLM, Ollama's OpenAI route, llama.cpp,
// TGI and Ollama's native API.
const (
	vllmRoleChunk    = `{"id":"chatcmpl-probe-0001","object":"chat.completion.chunk","created":1767000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`
	vllmContentChunk = `{"id":"chatcmpl-probe-0001","object":"chat.completion.chunk","created":1767000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":" Paris"},"logprobs":null,"finish_reason":null}]}`
	vllmFinishChunk  = `{"id":"chatcmpl-probe-0001","object":"chat.completion.chunk","created":1767000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}]}`
	vllmUsageChunk   = `{"id":"chatcmpl-probe-0001","object":"chat.completion.chunk","created":1767000000,"model":"m","choices":[],"usage":{"prompt_tokens":42,"completion_tokens":128,"total_tokens":170},"metrics":{"time_to_first_token_ms":31.5,"generation_time_ms":1012.0,"queue_time_ms":0.4,"mean_itl_ms":7.97,"tokens_per_second":123.1}}`

	completionChunk      = `{"id":"cmpl-1","object":"text_completion","created":1767000000,"model":"m","choices":[{"index":0,"text":" Paris","logprobs":null,"finish_reason":null}],"usage":null}`
	ollamaCompletionZero = `{"id":"cmpl-1","object":"text_completion","created":1767000000,"model":"m","choices":[{"text":" Paris","index":0,"finish_reason":null}],"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}}`

	llamaPartial = `{"index":0,"content":" Paris","tokens":[3681],"stop":false,"id_slot":0,"tokens_predicted":1,"tokens_evaluated":9}`
	llamaFinal   = `{"index":0,"content":"","tokens":[],"id_slot":0,"stop":true,"model":"qwen","tokens_predicted":64,"tokens_evaluated":9,"generation_settings":{},"prompt":"hi","has_new_line":false,"truncated":false,"stop_type":"limit","stopping_word":"","tokens_cached":72,"timings":{"cache_n":0,"prompt_n":9,"prompt_ms":11.2,"prompt_per_token_ms":1.24,"prompt_per_second":803.6,"predicted_n":64,"predicted_ms":690.4,"predicted_per_token_ms":10.79,"predicted_per_second":92.7}}`

	tgiToken = `{"index":1,"token":{"id":3681,"text":" Paris","logprob":-0.12,"special":false},"generated_text":null,"details":null}`
	tgiFinal = `{"index":2,"token":{"id":13,"text":".","logprob":-0.40,"special":false},"generated_text":" Paris.","details":{"finish_reason":"length","generated_tokens":2,"seed":null,"input_length":9}}`

	ollamaGenToken  = `{"model":"llama3.2","created_at":"2026-08-01T10:00:00.1Z","response":" Paris","done":false}`
	ollamaGenFinal  = `{"model":"llama3.2","created_at":"2026-08-01T10:00:00.9Z","response":"","done":true,"done_reason":"length","context":[1,2,3],"total_duration":912345678,"load_duration":1234567,"prompt_eval_count":26,"prompt_eval_duration":35000000,"eval_count":64,"eval_duration":850000000}`
	ollamaChatToken = `{"model":"llama3.2","created_at":"2026-08-01T10:00:00.1Z","message":{"role":"assistant","content":" Paris"},"done":false}`
	ollamaChatFinal = `{"model":"llama3.2","created_at":"2026-08-01T10:00:00.9Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"length","total_duration":912345678,"load_duration":1234567,"prompt_eval_count":26,"prompt_eval_duration":35000000,"eval_count":64,"eval_duration":850000000}`
)

func mustWireDialect(t testing.TB, name string) dialect {
	t.Helper()
	d, err := dialectByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestParseChunks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		dialect string
		data    string
		want    chunkInfo
	}{
		{"vllm role only", DialectOpenAIChat, vllmRoleChunk, chunkInfo{}},
		{"vllm content", DialectOpenAIChat, vllmContentChunk, chunkInfo{tokens: 1}},
		{"vllm finish", DialectOpenAIChat, vllmFinishChunk, chunkInfo{}},
		{"vllm usage", DialectOpenAIChat, vllmUsageChunk, chunkInfo{usage: true, promptTokens: 42, outputTokens: 128}},
		{"usage with cached tokens", DialectOpenAIChat, `{"choices":[],"usage":{"prompt_tokens":512,"completion_tokens":8,"prompt_tokens_details":{"cached_tokens":496}}}`,
			chunkInfo{usage: true, promptTokens: 512, outputTokens: 8, cachedTokens: 496}},
		{"usage with null details", DialectOpenAIChat, `{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":1,"prompt_tokens_details":null}}`,
			chunkInfo{usage: true, promptTokens: 10, outputTokens: 1}},
		{"done", DialectOpenAIChat, "[DONE]", chunkInfo{end: true}},
		{"llama.cpp oai first", DialectOpenAIChat, `{"choices":[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]}`, chunkInfo{}},
		{"spaced json", DialectOpenAIChat, `{"choices": [{"delta": {"content": "hi"}, "finish_reason": null}], "usage": null}`, chunkInfo{tokens: 1}},
		{"reasoning", DialectOpenAIChat, `{"choices":[{"delta":{"content":null,"reasoning_content":"hmm"},"finish_reason":null}]}`, chunkInfo{tokens: 1, reasoning: true}},
		{"reasoning newer vllm", DialectOpenAIChat, `{"choices":[{"delta":{"reasoning":"hmm"},"finish_reason":null}]}`, chunkInfo{tokens: 1, reasoning: true}},
		{"reasoning with finish", DialectOpenAIChat, `{"choices":[{"delta":{"reasoning":"hmm"},"finish_reason":"length"}]}`, chunkInfo{tokens: 1, reasoning: true}},
		{"content beside reasoning", DialectOpenAIChat, `{"choices":[{"delta":{"content":"a","reasoning":"hmm"},"finish_reason":null}]}`, chunkInfo{tokens: 1}},
		{"usage with reasoning tokens", DialectOpenAIChat, `{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":30,"completion_tokens_details":{"reasoning_tokens":20}}}`,
			chunkInfo{usage: true, promptTokens: 5, outputTokens: 30, reasonTokens: 20}},
		{"ollama chat thinking", DialectOllamaChat, `{"model":"m","message":{"role":"assistant","content":"","thinking":"hmm"},"done":false}`, chunkInfo{tokens: 1, reasoning: true}},
		{"ollama generate thinking", DialectOllamaGenerate, `{"model":"m","response":"","thinking":"hmm","done":false}`, chunkInfo{tokens: 1, reasoning: true}},
		{"responses text", DialectOpenAIResponses, `{"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi"}`, chunkInfo{tokens: 1}},
		{"responses reasoning", DialectOpenAIResponses, `{"type":"response.reasoning_text.delta","item_id":"rs_1","delta":"hmm"}`, chunkInfo{tokens: 1, reasoning: true}},
		{"responses summary", DialectOpenAIResponses, `{"type":"response.reasoning_summary_text.delta","item_id":"rs_1","summary_index":0,"delta":"hmm"}`, chunkInfo{tokens: 1, reasoning: true}},
		{"responses empty delta", DialectOpenAIResponses, `{"type":"response.output_text.delta","delta":""}`, chunkInfo{}},
		{"responses created", DialectOpenAIResponses, `{"type":"response.created","response":{"id":"r","status":"in_progress","error":null,"usage":null}}`, chunkInfo{}},
		{"responses text done", DialectOpenAIResponses, `{"type":"response.output_text.done","text":"Hi there"}`, chunkInfo{}},
		{"responses completed", DialectOpenAIResponses, `{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":7,"input_tokens_details":{"cached_tokens":4},"output_tokens":9,"output_tokens_details":{"reasoning_tokens":6},"total_tokens":16}}}`,
			chunkInfo{end: true, usage: true, promptTokens: 7, outputTokens: 9, cachedTokens: 4, reasonTokens: 6}},
		{"responses incomplete", DialectOpenAIResponses, `{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":7,"output_tokens":9}}}`,
			chunkInfo{end: true, usage: true, promptTokens: 7, outputTokens: 9}},
		{"responses error", DialectOpenAIResponses, `{"type":"error","code":"x","message":"boom"}`, chunkInfo{serverErr: "error event: boom"}},
		{"content with last chunk", DialectOpenAIChat, `{"choices":[{"delta":{"content":"."},"finish_reason":"stop"}]}`, chunkInfo{tokens: 1}},
		{"escaped fffd", DialectOpenAIChat, `{"choices":[{"delta":{"content":"a\ufffd"},"finish_reason":null}]}`, chunkInfo{tokens: 1, replacements: 1}},
		{"raw fffd", DialectOpenAIChat, "{\"choices\":[{\"delta\":{\"content\":\"\xef\xbf\xbd\"},\"finish_reason\":null}]}", chunkInfo{tokens: 1, replacements: 1}},
		{"invalid utf8 bytes", DialectOpenAIChat, "{\"choices\":[{\"delta\":{\"content\":\"\xe4\xb8\"},\"finish_reason\":null}]}", chunkInfo{tokens: 1, replacements: 2}},
		{"completions", DialectOpenAICompletions, completionChunk, chunkInfo{tokens: 1}},
		{"ollama zeroed usage", DialectOpenAICompletions, ollamaCompletionZero, chunkInfo{tokens: 1}},
		{"llama.cpp partial", DialectLlamaCpp, llamaPartial, chunkInfo{tokens: 1}},
		{"llama.cpp two tokens", DialectLlamaCpp, `{"index":0,"content":"ab","tokens":[1, 2],"stop":false}`, chunkInfo{tokens: 2}},
		{"llama.cpp held utf8", DialectLlamaCpp, `{"index":0,"content":"","tokens":[5],"stop":false}`, chunkInfo{tokens: 1}},
		{"llama.cpp final", DialectLlamaCpp, llamaFinal, chunkInfo{end: true, usage: true, promptTokens: 9, outputTokens: 64}},
		{"tgi token", DialectTGI, tgiToken, chunkInfo{tokens: 1}},
		{"tgi final", DialectTGI, tgiFinal, chunkInfo{tokens: 1, end: true, usage: true, promptTokens: 9, outputTokens: 2}},
		{"ollama generate token", DialectOllamaGenerate, ollamaGenToken, chunkInfo{tokens: 1}},
		{"ollama generate final", DialectOllamaGenerate, ollamaGenFinal, chunkInfo{end: true, usage: true, promptTokens: 26, outputTokens: 64}},
		{"ollama chat token", DialectOllamaChat, ollamaChatToken, chunkInfo{tokens: 1}},
		{"ollama chat final", DialectOllamaChat, ollamaChatFinal, chunkInfo{end: true, usage: true, promptTokens: 26, outputTokens: 64}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got chunkInfo
			if err := mustWireDialect(t, tt.dialect).parse([]byte(tt.data), &got); err != nil {
				t.Fatal(err)
			}
			got.timing = nil
			if !reflect.DeepEqual(infoOf(got), infoOf(tt.want)) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseServerTimings(t *testing.T) {
	t.Parallel()
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	tests := []struct {
		name    string
		dialect string
		data    string
		source  string
		want    map[event.Stage]time.Duration
	}{
		{"vllm metrics", DialectOpenAIChat, vllmUsageChunk, "vllm.metrics", map[event.Stage]time.Duration{
			event.StageQueue: ms(0.4), event.StagePrefill: ms(31.5), event.StageDecode: ms(1012), StageMeanITL: ms(7.97)}},
		{"llama.cpp timings", DialectLlamaCpp, llamaFinal, "llamacpp.timings", map[event.Stage]time.Duration{
			event.StagePrefill: ms(11.2), event.StageDecode: ms(690.4)}},
		{"ollama final", DialectOllamaGenerate, ollamaGenFinal, "ollama.final", map[event.Stage]time.Duration{
			event.StageServerE2E: 912345678, StageLoad: 1234567, event.StagePrefill: 35000000, event.StageDecode: 850000000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got chunkInfo
			if err := mustWireDialect(t, tt.dialect).parse([]byte(tt.data), &got); err != nil {
				t.Fatal(err)
			}
			if got.timing == nil || got.timing.Source != tt.source {
				t.Fatalf("timing %+v, want source %s", got.timing, tt.source)
			}
			if len(got.timing.Stages) != len(tt.want) {
				t.Errorf("stages %v, want %v", got.timing.Stages, tt.want)
			}
			for k, v := range tt.want {
				if got.timing.Stages[k] != v {
					t.Errorf("%s = %v, want %v", k, got.timing.Stages[k], v)
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	serverErrs := []struct{ dialect, data, msg string }{
		{DialectOpenAIChat, `{"error":{"message":"CUDA out of memory","type":"InternalServerError","code":500}}`, "CUDA out of memory"},
		{DialectOpenAIChat, `{"object":"error","message":"boom","type":"BadRequestError"}`, "boom"},
		{DialectLlamaCpp, `{"error":{"code":500,"message":"slot unavailable","type":"server_error"}}`, "slot unavailable"},
		{DialectTGI, `{"error":"Request failed during generation: Server error: CUDA OOM","error_type":"generation"}`, "generation: Request failed"},
		{DialectOllamaGenerate, `{"error":"model runner crashed"}`, "model runner crashed"},
	}
	for _, tt := range serverErrs {
		var got chunkInfo
		if err := mustWireDialect(t, tt.dialect).parse([]byte(tt.data), &got); err != nil {
			t.Fatalf("%s: %v", tt.dialect, err)
		}
		if !strings.Contains(got.serverErr, tt.msg) {
			t.Errorf("%s: serverErr %q, want %q", tt.dialect, got.serverErr, tt.msg)
		}
	}
	bad := []struct{ dialect, data string }{
		{DialectOpenAIChat, `{"choices":[{"delta":{"role":"assistant"}]}`},
		{DialectOpenAIChat, `{"choices":[{"delta":{"content":"a`},
		{DialectOpenAIChat, `not json`},
		{DialectOpenAIChat, `{"choices":[{"delta":{"content":"bad \x escape"},"finish_reason":null}]}`},
		{DialectLlamaCpp, `{"content":" x","stop":true,}`},
		{DialectTGI, `{"token":{"text":1}}`},
		{DialectOllamaChat, `{"message":{"content":"x"},"done":true`},
	}
	for _, tt := range bad {
		var got chunkInfo
		err := mustWireDialect(t, tt.dialect).parse([]byte(tt.data), &got)
		if !errors.Is(err, errMalformed) {
			t.Errorf("%s %q: err = %v, want malformed", tt.dialect, tt.data, err)
		}
	}
}

// wireChunkTemplates put a content string into each dialect's usual chunk.
var wireChunkTemplates = []struct {
	dialect string
	prefix  string
	suffix  string
}{
	{DialectOpenAIChat, `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":`, `},"logprobs":null,"finish_reason":null}]}`},
	{DialectOpenAICompletions, `{"id":"c","object":"text_completion","choices":[{"index":0,"text":`, `,"finish_reason":null}]}`},
	{DialectLlamaCpp, `{"index":0,"content":`, `,"stop":false,"id_slot":0}`},
	{DialectTGI, `{"index":1,"token":{"id":1,"text":`, `,"logprob":-0.1,"special":false},"generated_text":null,"details":null}`},
	{DialectOllamaGenerate, `{"model":"m","response":`, `,"done":false}`},
	{DialectOllamaChat, `{"model":"m","message":{"role":"assistant","content":`, `},"done":false}`},
	{DialectOpenAIChat, `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"reasoning":`, `},"logprobs":null,"finish_reason":null}]}`},
	{DialectOllamaChat, `{"model":"m","message":{"role":"assistant","content":"","thinking":`, `},"done":false}`},
	{DialectOpenAIResponses, `{"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":`, `,"logprobs":[]}`},
	{DialectOpenAIResponses, `{"type":"response.reasoning_text.delta","sequence_number":1,"item_id":"rs_1","output_index":0,"content_index":0,"delta":`, `}`},
	{DialectAnthropicMessages, `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":`, `}}`},
	{DialectAnthropicMessages, `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":`, `}}`},
	{DialectAnthropicMessages, `{"index":0,"delta":{"text":`, `,"type":"text_delta"},"type":"content_block_delta"}`},
	{DialectAnthropicMessages, `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":`, `}}`},
}

// FuzzParseChunk checks that no input panics a chunk parser, that failures
// are reported as malformed, and that the fast path agrees with the full
// decoder on server-shaped chunks whatever their content string holds.
func FuzzParseChunk(f *testing.F) {
	f.Add(uint8(0), []byte(" Paris"), false)
	f.Add(uint8(1), []byte("\xe4\xb8"), true)
	f.Add(uint8(2), []byte(`\ud83d\ude00`), true)
	f.Add(uint8(3), []byte(`a"b`), false)
	f.Add(uint8(4), []byte("\ufffd"), false)
	f.Add(uint8(5), []byte(`\ud800x`), true)
	f.Fuzz(func(t *testing.T, which uint8, content []byte, raw bool) {
		tpl := wireChunkTemplates[int(which)%len(wireChunkTemplates)]
		d := mustWireDialect(t, tpl.dialect)

		// Arbitrary bytes as a whole chunk: no panic, only malformed errors.
		var any chunkInfo
		if err := d.parse(content, &any); err != nil && !errors.Is(err, errMalformed) {
			t.Fatalf("non-malformed error %v", err)
		}

		// The content as a JSON string: raw (possibly invalid) bytes or encoded.
		var str []byte
		if raw {
			// Raw bytes test invalid UTF-8; quotes and backslashes would
			// change the chunk's structure instead.
			var clean []byte
			for _, c := range content {
				if c != '"' && c != '\\' {
					clean = append(clean, c)
				}
			}
			str = append(append([]byte(`"`), clean...), '"')
		} else {
			str, _ = json.Marshal(string(content))
		}
		chunk := append(append([]byte(tpl.prefix), str...), tpl.suffix...)
		var fast, full chunkInfo
		fastErr := d.parse(chunk, &fast)
		var fullErr error
		switch d := d.(type) {
		case openAIDialect:
			fullErr = d.parseFull(chunk, &full)
		case llamaCppDialect:
			fullErr = d.parseFull(chunk, &full)
		case tgiDialect:
			fullErr = d.parseFull(chunk, &full)
		case ollamaDialect:
			fullErr = d.parseFull(chunk, &full)
		case responsesDialect:
			fullErr = d.parseFull(chunk, &full)
		case anthropicDialect:
			fullErr = d.parseFull(chunk, &full)
		}
		if (fastErr == nil) != (fullErr == nil) {
			t.Fatalf("%s %q: fast err %v, full err %v", tpl.dialect, chunk, fastErr, fullErr)
		}
		if fastErr != nil {
			return
		}
		fast.timing, full.timing = nil, nil
		if !reflect.DeepEqual(infoOf(fast), infoOf(full)) || fast.answerText() != full.answerText() {
			t.Fatalf("%s %q:\nfast %+v\nfull %+v", tpl.dialect, chunk, fast, full)
		}
	})
}

func BenchmarkParseChunk(b *testing.B) {
	for _, bc := range []struct{ dialect, data string }{
		{DialectOpenAIChat, vllmContentChunk},
		{DialectOpenAICompletions, completionChunk},
		{DialectLlamaCpp, llamaPartial},
		{DialectTGI, tgiToken},
		{DialectOllamaGenerate, ollamaGenToken},
		{DialectOllamaChat, ollamaChatToken},
		{DialectOpenAIResponses, `{"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":" Paris"}`},
		{DialectAnthropicMessages, anthText},
	} {
		b.Run(bc.dialect, func(b *testing.B) {
			d := mustWireDialect(b, bc.dialect)
			data := []byte(bc.data)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			var c chunkInfo
			for b.Loop() {
				c = chunkInfo{}
				if err := d.parse(data, &c); err != nil || c.tokens != 1 {
					b.Fatalf("parse: %v %+v", err, c)
				}
			}
		})
	}
	b.Run("json.Unmarshal-baseline", func(b *testing.B) {
		data := []byte(vllmContentChunk)
		b.ReportAllocs()
		for b.Loop() {
			var ch openAIChunk
			if err := json.Unmarshal(data, &ch); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// infoOf is c without its text, comparable: the fast paths keep the text
// quoted, the full decode unquoted (compare answerText for it).
func infoOf(c chunkInfo) chunkInfo {
	c.quoted, c.text = nil, ""
	return c
}
