package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// messagesEv is one Messages API stream event as a client reads it.
type messagesEv struct {
	name string // the SSE event line
	typ  string // the data's type
	data []byte
	ev   struct {
		Index   *int `json:"index"`
		Message *struct {
			ID    string        `json:"id"`
			Usage messagesUsage `json:"usage"`
		} `json:"message"`
		ContentBlock *messagesBlock `json:"content_block"`
		Delta        *struct {
			Type       string  `json:"type"`
			Text       *string `json:"text"`
			Thinking   *string `json:"thinking"`
			StopReason *string `json:"stop_reason"`
		} `json:"delta"`
		Usage *messagesUsage `json:"usage"`
		Error *messagesError `json:"error"`
		Truth *Truth         `json:"latscope_truth"`
	}
}

// postMessages sends a Messages API request and reads the whole answer:
// its status, headers, body and, for a stream, its events.
func postMessages(t *testing.T, url string, body any, hdr map[string]string) (*http.Response, []byte, []messagesEv) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+MessagesPath, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, raw, nil
	}
	var evs []messagesEv
	for frame := range strings.SplitSeq(strings.TrimSpace(string(raw)), "\n\n") {
		var e messagesEv
		for line := range strings.SplitSeq(frame, "\n") {
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				e.name = v
			} else if v, ok := strings.CutPrefix(line, "data: "); ok {
				e.data = []byte(v)
			}
		}
		var typ struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(e.data, &typ); err != nil {
			t.Fatalf("event %q: %v", frame, err)
		}
		if err := json.Unmarshal(e.data, &e.ev); err != nil {
			t.Fatalf("event %q: %v", frame, err)
		}
		e.typ = typ.Type
		evs = append(evs, e)
	}
	return resp, raw, evs
}

func messagesBody(prompt string, maxTokens int, stream bool) map[string]any {
	return map[string]any{"model": DefaultModel, "max_tokens": maxTokens, "stream": stream,
		"messages": []map[string]any{{"role": "user", "content": prompt}}}
}

// describe names each event by its type, and a delta or block by its own.
func describe(evs []messagesEv) string {
	var out []string
	for _, e := range evs {
		s := e.typ
		switch {
		case e.ev.ContentBlock != nil:
			s += ":" + e.ev.ContentBlock.Type
		case e.ev.Delta != nil && e.ev.Delta.Type != "":
			s += ":" + e.ev.Delta.Type
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// A reasoning model's Messages stream: message_start with the prompt's
// usage and a ping, the thinking block (deltas, then its signature), the
// text block, message_delta with the stop reason and the output tokens,
// message_stop with the truth; every event named as its data's type.
func TestMessagesStreamThinking(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{Profile: tinyProfile(t), Reasoning: Reasoning{Tokens: 2}})
	resp, body, evs := postMessages(t, url, messagesBody("hello there", 5, true), map[string]string{TruthHeader: "1"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	want := "message_start ping content_block_start:thinking content_block_delta:thinking_delta content_block_delta:thinking_delta " +
		"content_block_delta:signature_delta content_block_stop content_block_start:text " +
		"content_block_delta:text_delta content_block_delta:text_delta content_block_delta:text_delta content_block_stop message_delta message_stop"
	if got := describe(evs); got != want {
		t.Fatalf("events\n%s\nwant\n%s", got, want)
	}
	for _, e := range evs {
		if e.name != e.typ {
			t.Errorf("event line %q carries type %q", e.name, e.typ)
		}
		if e.typ == evBlockDelta && (e.ev.Delta.Type == "text_delta" && *e.ev.Index != 1 || e.ev.Delta.Type == "thinking_delta" && *e.ev.Index != 0) {
			t.Errorf("%s in block %d", e.ev.Delta.Type, *e.ev.Index)
		}
	}
	start, end := evs[0].ev.Message, evs[len(evs)-2].ev
	if start == nil || start.Usage.InputTokens == 0 || start.Usage.OutputTokens != 0 || !strings.HasPrefix(start.ID, "msg_") {
		t.Errorf("message_start %s", evs[0].data)
	}
	if end.Usage == nil || end.Usage.OutputTokens != 5 || end.Usage.InputTokens != start.Usage.InputTokens ||
		end.Delta.StopReason == nil || *end.Delta.StopReason != "max_tokens" {
		t.Errorf("message_delta %s", evs[len(evs)-2].data)
	}
	if tr := evs[len(evs)-1].ev.Truth; tr == nil || tr.OutputTokens != 5 || tr.PromptTokens != start.Usage.InputTokens {
		t.Errorf("message_stop %s", evs[len(evs)-1].data)
	}
}

// Pings come after message_start and every messagesPingEvery tokens, and
// the usage splits the prompt into fresh and cache-read tokens.
func TestMessagesStreamPingsAndCache(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{Profile: tinyProfile(t), PrefixCacheBlocks: 64})
	const out = 2*messagesPingEvery + 1
	for i, cached := range []int{0, 192} { // the second time: (200-1)/16 whole blocks
		_, body, evs := postMessages(t, url, messagesBody(promptOf(200), out, true), nil)
		pings, text := 0, 0
		for _, e := range evs {
			switch {
			case e.typ == evPing:
				pings++
			case e.typ == evBlockDelta && e.ev.Delta.Type == "text_delta":
				text++
			}
		}
		if pings != 3 || text != out {
			t.Errorf("request %d: %d pings, %d text deltas; want 3 and %d:\n%s", i, pings, text, out, body)
		}
		for _, u := range []*messagesUsage{&evs[0].ev.Message.Usage, evs[len(evs)-2].ev.Usage} {
			if u.InputTokens+u.CacheReadInputTokens != 200 || u.CacheReadInputTokens != cached {
				t.Errorf("request %d: usage %+v, want 200 prompt tokens of which %d cache-read", i, u, cached)
			}
		}
	}
}

func TestMessagesNonStream(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{Profile: tinyProfile(t)})
	resp, body, _ := postMessages(t, url, messagesBody("hi", 4, false), nil)
	var m struct {
		Type       string `json:"type"`
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type, Text string
		} `json:"content"`
		Usage messagesUsage `json:"usage"`
	}
	if err := json.Unmarshal(body, &m); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, %v: %s", resp.StatusCode, err, body)
	}
	if m.Type != "message" || m.StopReason != "max_tokens" || len(m.Content) != 1 || m.Content[0].Text == "" || m.Usage.OutputTokens != 4 {
		t.Errorf("message %s", body)
	}
}

// Errors come in the Messages API's shape, with its types: bad requests,
// an unknown model, a wrong method, the status fault (529: overloaded, with
// Retry-After); a generation that fails mid-stream ends with an error event.
func TestMessagesErrors(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{Profile: tinyProfile(t)})
	ok := messagesBody("hi", 3, true)
	for _, tc := range []struct {
		name   string
		body   any
		hdr    map[string]string
		status int
		typ    string
	}{
		{"no model", map[string]any{"max_tokens": 3, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}, nil, 400, "invalid_request_error"},
		{"no max_tokens", map[string]any{"model": DefaultModel, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}, nil, 400, "invalid_request_error"},
		{"no messages", map[string]any{"model": DefaultModel, "max_tokens": 3}, nil, 400, "invalid_request_error"},
		{"system role in messages", map[string]any{"model": DefaultModel, "max_tokens": 3, "messages": []any{map[string]any{"role": "system", "content": "x"}}}, nil, 400, "invalid_request_error"},
		{"bad thinking", map[string]any{"model": DefaultModel, "max_tokens": 3, "messages": []any{map[string]any{"role": "user", "content": "x"}}, "thinking": map[string]any{"type": "maybe"}}, nil, 400, "invalid_request_error"},
		{"unknown model", map[string]any{"model": "claude-9", "max_tokens": 3, "messages": []any{map[string]any{"role": "user", "content": "x"}}}, nil, 404, "not_found_error"},
		{"overloaded", ok, map[string]string{FaultHeader: "status=529"}, 529, "overloaded_error"},
		{"rate limited", ok, map[string]string{FaultHeader: "status=429"}, 429, "rate_limit_error"},
	} {
		resp, body, _ := postMessages(t, url, tc.body, tc.hdr)
		var e struct {
			Type  string        `json:"type"`
			Error messagesError `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != tc.status || e.Type != "error" || e.Error.Type != tc.typ || e.Error.Message == "" {
			t.Errorf("%s: status %d, %v: %s; want %d %s", tc.name, resp.StatusCode, err, body, tc.status, tc.typ)
		}
		if tc.status == 529 && resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s: no Retry-After", tc.name)
		}
	}

	resp, err := http.Get(url + MessagesPath)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(string(b), `"type":"error"`) {
		t.Errorf("GET: status %d: %s", resp.StatusCode, b)
	}

	_, body, evs := postMessages(t, url, messagesBody("hi", 6, true), map[string]string{FaultHeader: "error-after=2"})
	last := evs[len(evs)-1]
	if last.name != evError || last.ev.Error == nil || last.ev.Error.Type != "api_error" || strings.Contains(string(body), evMessageStop) {
		t.Errorf("error-after: stream ends with %s:\n%s", last.data, body)
	}
}
