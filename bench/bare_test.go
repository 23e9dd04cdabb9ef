package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestBareClientCountsFastServerTokens(t *testing.T) {
	t.Parallel()
	for _, tpw := range []int{1, 16, 7} {
		t.Run(fmt.Sprintf("%d per write", tpw), func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(FastServer{TokensPerWrite: tpw})
			defer srv.Close()
			c := NewBareClient(srv.URL, "m", nil)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for _, n := range []int{1, 100, 257} {
				tr := c.Stream(ctx, StreamRequest{ID: "r1", Prompt: "hi", OutputTokens: n})
				if tr.Err != nil {
					t.Fatalf("stream %d tokens: %v", n, tr.Err)
				}
				if got := tr.Frames(); got != n {
					t.Errorf("frames = %d, want %d", got, n)
				}
				for i := 1; i < tr.Frames(); i++ {
					if tr.At(i) < tr.At(i-1) {
						t.Fatalf("arrival %d (%s) before arrival %d (%s)", i, tr.At(i), i-1, tr.At(i-1))
					}
				}
			}
		})
	}
}

func TestBareClientSendsRequest(t *testing.T) {
	t.Parallel()
	var gotID, gotBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotID = r.Header.Get("X-Request-Id")
		b, _ := io.ReadAll(r.Body)
		gotBody = string(b)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	tr := NewBareClient(srv.URL+"/", "my-model", nil).Stream(context.Background(), StreamRequest{ID: "abc", Prompt: "hello", OutputTokens: 3})
	if tr.Err != nil {
		t.Fatal(tr.Err)
	}
	if gotID != "abc" {
		t.Errorf("X-Request-Id = %q, want abc", gotID)
	}
	for _, want := range []string{`"model":"my-model"`, `"max_tokens":3`, `"stream":true`, `"ignore_eos":true`, `"content":"hello"`} {
		if !strings.Contains(gotBody, want) {
			t.Errorf("body %s lacks %s", gotBody, want)
		}
	}
}

func TestBareClientReportsHTTPStatus(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nope", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	tr := NewBareClient(srv.URL, "m", nil).Stream(context.Background(), StreamRequest{OutputTokens: 3})
	if tr.Err == nil || !strings.Contains(tr.Err.Error(), "status 503") {
		t.Fatalf("err = %v, want status 503", tr.Err)
	}
}

func TestReadBareStream(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 10000)
	tests := []struct {
		name    string
		stream  string
		want    int
		wantErr bool
	}{
		{"vllm chat", "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n" +
			"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n" +
			"data: {\"choices\":[{\"delta\":{\"content\":\" there\"}}]}\n\n" +
			"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}]}\n\n" +
			"data: {\"choices\":[],\"usage\":{\"completion_tokens\":2}}\n\n" +
			"data: [DONE]\n\n", 2, false},
		{"no space, CRLF, comments", ": keep-alive\r\n\r\ndata:{\"text\":\"a\"}\r\n\r\ndata:{\"text\": \"b\"}\r\n\r\n", 2, false},
		{"escaped key in content is not a key", `data: {"content":"say \"content\":\"x\""}` + "\n\n" + `data: {"content":""}` + "\n\n", 1, false},
		{"reasoning", `data: {"delta":{"reasoning_content":"hmm","content":null}}` + "\n\n", 1, false},
		{"stops at DONE", "data: {\"content\":\"a\"}\n\ndata: [DONE]\n\ndata: {\"content\":\"b\"}\n\n", 1, false},
		{"line longer than the buffer", "data: {\"content\":\"" + long + "\"}\n\n", 1, false},
		{"no final newline", "data: {\"content\":\"a\"}", 1, false},
		{"line over the limit", "data: {\"content\":\"" + strings.Repeat("y", maxBareLine) + "\"}\n\n", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := readBareStream(strings.NewReader(tt.stream), time.Now(), nil)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if len(got) != tt.want {
				t.Errorf("frames = %d, want %d", len(got), tt.want)
			}
		})
	}
}

func FuzzReadBareStream(f *testing.F) {
	f.Add([]byte("data: {\"content\":\"a\"}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data:{\"text\":\"\"}\r\n"))
	f.Add([]byte("data: \n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		got, _ := readBareStream(strings.NewReader(string(stream)), time.Now(), nil)
		if lines := strings.Count(string(stream), "data:"); len(got) > lines {
			t.Fatalf("%d frames from %d data lines", len(got), lines)
		}
	})
}

func TestBareClientReusesConnection(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(FastServer{TokensPerWrite: 4})
	var mu sync.Mutex
	conns := 0
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	srv.Start()
	defer srv.Close()
	c := NewBareClient(srv.URL, "m", nil)
	for range 5 {
		if tr := c.Stream(context.Background(), StreamRequest{OutputTokens: 10}); tr.Err != nil || tr.Frames() != 10 {
			t.Fatalf("frames %d err %v", tr.Frames(), tr.Err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if conns != 1 {
		t.Errorf("5 sequential requests opened %d connections, want 1", conns)
	}
}
