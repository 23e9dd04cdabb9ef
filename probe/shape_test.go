package probe

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// shapeTemplates are OpenAI chunks in several servers' key orders, with
// the content (or reasoning) string cut out.
var shapeTemplates = []struct {
	chat           bool
	prefix, suffix string
}{
	{true, `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":`, `},"logprobs":null,"finish_reason":null}]}`},
	{true, `{"choices":[{"finish_reason":null,"index":0,"delta":{"content":`, `}}],"created":1,"id":"c","model":"m","object":"chat.completion.chunk"}`},
	{true, `{"choices":[{"delta":{"content":null,"reasoning_content":`, `},"finish_reason":null}]}`},
	{true, `{"choices":[{"delta":{"content":"","reasoning":`, `},"finish_reason":null}],"usage":null}`},
	{true, `{"choices":[{"delta":{"content":`, `},"finish_reason":"stop"}]}`},
	{true, `{"choices":[{"delta":{"content":`, `}}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`},
	{false, `{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":`, `,"logprobs":null,"finish_reason":null}],"usage":null}`},
	{false, `{"choices":[{"text":`, `,"index":0,"finish_reason":null}],"usage":{"prompt_tokens":0,"completion_tokens":0}}`},
}

// FuzzChunkShape checks that a stream's remembered chunk shape never
// changes a result: after one chunk has been parsed, the next one, of the
// same shape or not, must parse as it does on its own.
func FuzzChunkShape(f *testing.F) {
	f.Add(uint8(0), []byte(" Paris"), []byte(" London"), false, false)
	f.Add(uint8(1), []byte("a"), []byte(""), false, false)
	f.Add(uint8(2), []byte("hmm"), []byte("\xe4\xb8"), true, false)
	f.Add(uint8(3), []byte("x"), []byte(`\ud800x`), true, false)
	f.Add(uint8(0), []byte("x"), []byte(`{"choices":[{"delta":{"content":"y"}}],"error":"e"}`), false, true)
	f.Fuzz(func(t *testing.T, which uint8, first, second []byte, raw, whole bool) {
		tpl := shapeTemplates[int(which)%len(shapeTemplates)]
		d := openAIDialect{chat: tpl.chat}
		build := func(content []byte) []byte {
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
		next := second
		if !whole {
			next = build(second)
		}
		var shape chunkShape
		var c0 chunkInfo
		_ = d.parseStream(build(first), &c0, &shape)

		var shaped, alone chunkInfo
		shapedErr := d.parseStream(next, &shaped, &shape)
		aloneErr := d.parse(next, &alone)
		if (shapedErr == nil) != (aloneErr == nil) || shapedErr != nil && !errors.Is(shapedErr, errMalformed) {
			t.Fatalf("%q: with shape err %v, alone err %v", next, shapedErr, aloneErr)
		}
		shaped.timing, alone.timing = nil, nil
		if !reflect.DeepEqual(infoOf(shaped), infoOf(alone)) || shaped.answerText() != alone.answerText() {
			t.Fatalf("%q:\nwith shape %+v\nalone      %+v", next, shaped, alone)
		}
	})
}

func TestChunkShapeUsed(t *testing.T) {
	t.Parallel()
	d := openAIDialect{chat: true}
	var shape chunkShape
	var c chunkInfo
	if err := d.parseStream([]byte(vllmContentChunk), &c, &shape); err != nil || c.tokens != 1 {
		t.Fatalf("first chunk: %v %+v", err, c)
	}
	next := []byte(`{"id":"chatcmpl-probe-0001","object":"chat.completion.chunk","created":1767000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":"\ufffd!"},"logprobs":null,"finish_reason":null}]}`)
	if v, ok := shape.match(next); !ok || v.replacements != 1 {
		t.Fatalf("shape not matched: %v %+v", ok, v)
	}
	for _, other := range []string{vllmFinishChunk, vllmUsageChunk, vllmRoleChunk} {
		if _, ok := shape.match([]byte(other)); ok {
			t.Errorf("shape matched %s", other)
		}
	}
}

// BenchmarkParseChunkShaped is BenchmarkParseChunk for the chunks after a
// stream's first: the shape is remembered.
func BenchmarkParseChunkShaped(b *testing.B) {
	for _, bc := range []struct {
		name string
		d    openAIDialect
		data string
	}{
		{DialectOpenAIChat, openAIDialect{chat: true}, vllmContentChunk},
		{DialectOpenAICompletions, openAIDialect{}, completionChunk},
	} {
		b.Run(bc.name, func(b *testing.B) {
			data := []byte(bc.data)
			var shape chunkShape
			var c chunkInfo
			if err := bc.d.parseStream(data, &c, &shape); err != nil || !shape.ok {
				b.Fatalf("prime: %v", err)
			}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				c = chunkInfo{}
				if err := bc.d.parseStream(data, &c, &shape); err != nil || c.tokens != 1 {
					b.Fatalf("parse: %v %+v", err, c)
				}
			}
		})
	}
}
