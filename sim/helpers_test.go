package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// startServer serves a new Server on a loopback port until the test ends.
func startServer(t *testing.T, cfg Config) (*Server, string) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, "http://" + ln.Addr().String()
}

func tinyProfile(t *testing.T) Profile {
	t.Helper()
	p, err := ProfileByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// event is one SSE event as the client received it.
type event struct {
	at   time.Time
	data []byte
}

// streamResult is one streamed response.
type streamResult struct {
	status    int
	header    http.Header
	headersAt time.Time   // when the response headers arrived
	events    []event     // data events, [DONE] excluded
	done      bool        // [DONE] arrived
	trailer   http.Header // the stream's trailers, once it ended
	body      []byte      // non-SSE body (errors, non-streaming)
	err       error       // transport error while reading
}

// post sends body to url+path and reads the response, timing every SSE event.
func post(ctx context.Context, url, path string, body any, hdr map[string]string) streamResult {
	return postWith(ctx, http.DefaultClient, url, path, body, hdr)
}

// postWith is post with a client of the test's own.
func postWith(ctx context.Context, client *http.Client, url, path string, body any, hdr map[string]string) streamResult {
	b, err := json.Marshal(body)
	if err != nil {
		return streamResult{err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+path, bytes.NewReader(b))
	if err != nil {
		return streamResult{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return streamResult{err: err}
	}
	defer resp.Body.Close()
	res := streamResult{status: resp.StatusCode, header: resp.Header, headersAt: time.Now()}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		res.body, res.err = io.ReadAll(resp.Body)
		return res
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var data []byte
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			res.trailer = resp.Trailer
			if !errors.Is(err, io.EOF) || len(line) > 0 || !res.done {
				if !errors.Is(err, io.EOF) {
					res.err = err
				} else if !res.done {
					res.err = io.ErrUnexpectedEOF
				}
			}
			return res
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if data == nil {
				continue
			}
			if string(data) == "[DONE]" {
				res.done = true
			} else {
				res.events = append(res.events, event{at: time.Now(), data: data})
			}
			data = nil
		case bytes.HasPrefix(line, []byte("data: ")):
			data = append(data, line[len("data: "):]...)
		}
	}
}

// parsedChunk is the subset of a chunk the tests look at.
type parsedChunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
	Truth *Truth `json:"latscope_truth"`
}

func parseChunk(t *testing.T, data []byte) parsedChunk {
	t.Helper()
	var c parsedChunk
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatalf("chunk %q: %v", truncate(data), err)
	}
	return c
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

// contentOf returns the chunk's content text and whether it carries content.
func (c parsedChunk) content() (string, bool) {
	if len(c.Choices) == 0 {
		return "", false
	}
	ch := c.Choices[0]
	if ch.Delta.Content != nil && *ch.Delta.Content != "" {
		return *ch.Delta.Content, true
	}
	if ch.Text != nil && *ch.Text != "" {
		return *ch.Text, true
	}
	return "", false
}

// contentEvents returns the events that carry content.
func contentEvents(t *testing.T, res streamResult) []event {
	t.Helper()
	var out []event
	for _, e := range res.events {
		if _, ok := parseChunk(t, e.data).content(); ok {
			out = append(out, e)
		}
	}
	return out
}

// lastTruth returns the truth in the last event.
func lastTruth(t *testing.T, res streamResult) Truth {
	t.Helper()
	if len(res.events) == 0 {
		t.Fatalf("no events (status %d, err %v, body %s)", res.status, res.err, res.body)
	}
	c := parseChunk(t, res.events[len(res.events)-1].data)
	if c.Truth == nil {
		t.Fatalf("last chunk has no latscope_truth: %s", truncate(res.events[len(res.events)-1].data))
	}
	return *c.Truth
}

func chatBody(prompt string, maxTokens int, stream bool) map[string]any {
	b := map[string]any{
		"model":      DefaultModel,
		"messages":   []map[string]any{{"role": "user", "content": prompt}},
		"max_tokens": maxTokens,
		"ignore_eos": true,
		"stream":     stream,
	}
	if stream {
		b["stream_options"] = map[string]any{"include_usage": true}
	}
	return b
}

// promptOf returns a chat prompt of exactly n tokens (template included).
func promptOf(n int) string {
	return strings.TrimSpace(strings.Repeat("word ", n-templateTokensPerMsg-generationPromptToks))
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
