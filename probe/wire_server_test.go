package probe

// Loopback test servers that speak each wire format byte for byte.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// wireFrame is one write of a fake server, flushed, after an optional pause.
type wireFrame struct {
	delay time.Duration
	data  string
}

// wireSeenRequest is what a fake server received.
type wireSeenRequest struct {
	path   string
	header http.Header
	body   string
}

// wireServer is an httptest server that records requests.
type wireServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen []wireSeenRequest
}

func (s *wireServer) requests() []wireSeenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]wireSeenRequest(nil), s.seen...)
}

// newWireServer serves h on loopback, recording each request first.
func newWireServer(t testing.TB, h http.HandlerFunc) *wireServer {
	t.Helper()
	fs := &wireServer{}
	fs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fs.mu.Lock()
		fs.seen = append(fs.seen, wireSeenRequest{path: r.URL.Path, header: r.Header.Clone(), body: string(body)})
		fs.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(fs.Close)
	return fs
}

// wireStream writes a 200 response of the given content type, one frame
// per flush, stopping early if the client goes away.
func wireStream(contentType string, frames []wireFrame) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(http.StatusOK)
		fl := w.(http.Flusher)
		fl.Flush()
		for _, f := range frames {
			if f.delay > 0 {
				select {
				case <-time.After(f.delay):
				case <-r.Context().Done():
					return
				}
			}
			if _, err := io.WriteString(w, f.data); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

// sseFrames wraps each data payload as one SSE event ("data: x\n\n").
func sseFrames(payloads ...string) []wireFrame {
	out := make([]wireFrame, len(payloads))
	for i, p := range payloads {
		out[i] = wireFrame{data: "data: " + p + "\n\n"}
	}
	return out
}

// ndjsonFrames writes each object as one line.
func ndjsonFrames(lines ...string) []wireFrame {
	out := make([]wireFrame, len(lines))
	for i, l := range lines {
		out[i] = wireFrame{data: l + "\n"}
	}
	return out
}

// pacedFrames sets the same delay before every frame.
func pacedFrames(d time.Duration, frames []wireFrame) []wireFrame {
	for i := range frames {
		frames[i].delay = d
	}
	return frames
}

// repeatStr returns n copies of s.
func repeatStr(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// wireHijackReset answers with stream headers and the given raw chunked
// body bytes, then, once the client has read them (read is closed),
// resets the connection (SO_LINGER 0 sends an RST).
func wireHijackReset(body string, read <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
		fmt.Fprintf(buf, "%x\r\n%s\r\n", len(body), body)
		_ = buf.Flush()
		// An RST discards what the client has not read yet: wait until it
		// has (bounded, so a broken client cannot hang the test).
		select {
		case <-read:
		case <-time.After(10 * time.Second):
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = conn.Close()
	}
}

// wireBlockUntilGone sends headers and one event, then waits for the client to
// leave (or a bound, so a broken client cannot hang the test).
func wireBlockUntilGone(first string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, first)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}
}

// onFirstRead makes the client call fn once, the first time a response body
// hands it data: the moment it holds the first event, for tests that act
// on that event rather than on a timer.
func onFirstRead(fn func()) func(*ClientConfig) {
	return func(cfg *ClientConfig) {
		var once sync.Once
		cfg.HTTPClient = &http.Client{Transport: hookTransport{next: NewTransport(), hook: func() { once.Do(fn) }}}
	}
}

// hookTransport calls hook when a response body first returns data.
type hookTransport struct {
	next *http.Transport
	hook func()
}

func (h hookTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := h.next.RoundTrip(req)
	if err == nil {
		resp.Body = &hookBody{ReadCloser: resp.Body, hook: h.hook}
	}
	return resp, err
}

func (h hookTransport) CloseIdleConnections() { h.next.CloseIdleConnections() }

type hookBody struct {
	io.ReadCloser
	hook func()
}

func (b *hookBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.hook()
	}
	return n, err
}

// newWireClient builds a client for srv.
func newWireClient(t testing.TB, url, dialect string, mod func(*ClientConfig)) *Client {
	t.Helper()
	cfg := ClientConfig{BaseURL: url, Dialect: dialect, Model: "m"}
	if mod != nil {
		mod(&cfg)
	}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func wireSpec(id string, out int) RequestSpec {
	return RequestSpec{
		ID: id, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7",
		Prompt: "What is the capital of France?", PromptTokens: 9, OutputTokens: out,
	}
}

// wireWaitGoroutines waits until the goroutine count is back to at most base,
// for a bounded time, and fails with a dump otherwise.
func wireWaitGoroutines(t *testing.T, base int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		n := runtime.NumGoroutine()
		if n <= base {
			return
		}
		select {
		case <-ctx.Done():
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines, want <= %d:\n%s", n, base, wireFirstLines(string(buf), 80))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func wireFirstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
