package sim

import (
	"encoding/json"
	"testing"
)

// FuzzParseRequests feeds arbitrary bodies to every request parser: they
// must return a request or a 4xx error, never panic.
func FuzzParseRequests(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}]}`,
		`{"prompt":[1,2,3],"max_tokens":1}`, `{"prompt":["x"]}`, `{"prompt":"a","min_tokens":2,"max_tokens":1}`,
		`{"max_tokens":"x"}`, `[]`, `null`, `{"messages":null}`, ``,
		`{"model":"m","max_tokens":2,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":1}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(g *generation, e *apiError) {
			if (g == nil) == (e == nil) {
				t.Fatalf("got %v and %v", g, e)
			}
			if e != nil && (e.Status < 400 || e.Status > 499) {
				t.Fatalf("status %d", e.Status)
			}
			if g != nil && (g.maxTokens < 1 || g.minTokens > g.maxTokens || g.promptTokens() < 0) {
				t.Fatalf("bad generation %+v", g)
			}
		}
		check(parseChat(body))
		check(parseCompletion(body))
		check(parseResponses(body))
		check(parseMessages(body))
		var tr tokenizeRequest
		if decodeJSON(body, &tr) == nil {
			ids, e := tokenizeIDs(tr)
			if (e == nil) && ids == nil && tr.Messages == nil {
				t.Fatal("no ids and no error")
			}
		}
	})
}

// FuzzParseFault checks that a parsed fault prints back to itself.
func FuzzParseFault(f *testing.F) {
	for _, s := range []string{"status=429", "reset-after=3,stall=10", "oversized,split-utf8", "slow-headers=5", "x=1", ",,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		got, err := ParseFault(spec)
		if err != nil {
			return
		}
		back, err := ParseFault(got.String())
		if err != nil || back != got {
			b, _ := json.Marshal(got)
			t.Fatalf("round trip of %q: %s -> %q -> %+v, %v", spec, b, got.String(), back, err)
		}
	})
}
