package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestSimBadModeFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--headers", "late"},
		{"--loading", "-1s"},
		{"--prefix-cache-blocks", "-1"},
		{"--fault", "error-after=x"},
		{"--rtt", "-1ms"},
		{"--jitter", "-1ms"},
		{"--prefill-workers", "2"}, // needs --disagg
		{"--kv-latency", "5ms"},
		{"--disagg", "--decode-workers", "-1"},
		{"--disagg", "--kv-bandwidth", "-1"},
		{"--disagg", "--prefix-cache-blocks", "8"},
	} {
		cmd := newSimCmd()
		cmd.SetArgs(append(args, "--listen", "127.0.0.1:0"))
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		cmd.SilenceUsage = true
		if err := cmd.ExecuteContext(context.Background()); err == nil {
			t.Errorf("sim %v: no error", args)
		}
	}
}

// TestSimServesModes starts `latscope sim` with the modes on and checks one
// that shows at once: while loading, /health is not ready.
func TestSimServesModes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	cmd := newSimCmd()
	cmd.SetArgs([]string{"--listen", "127.0.0.1:0", "--profile", "tiny", "--loading", "1h", "--headers", "slotted",
		"--close-after-stream", "--prefix-cache-blocks", "64", "--keep-abandoned", "--no-chunked-prefill", "--nagle"})
	cmd.SetErr(pw)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx); pw.Close() }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no start line: %v (%v)", err, <-done)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	i := strings.Index(line, "http://")
	if i < 0 {
		t.Fatalf("start line %q has no URL", line)
	}
	url := strings.Fields(line[i:])[0]
	resp, err := http.Get(url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/health while loading = %d, want 503", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("sim: %v", err)
	}
}

// TestSimDefaultDeployment: `latscope sim` as it starts puts its proxy hop
// in front, which reports itself in Server-Timing beside the server's
// stages, and the stream's trailer carries the first frame's stages.
func TestSimDefaultDeployment(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	cmd := newSimCmd()
	cmd.SetArgs([]string{"--listen", "127.0.0.1:0", "--profile", "tiny"})
	cmd.SetErr(pw)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx); pw.Close() }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no start line: %v (%v)", err, <-done)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if !strings.Contains(line, "behind a proxy hop") || !strings.Contains(line, "RTT 1ms") {
		t.Errorf("start line %q does not say the proxy hop and the 1 ms distance", line)
	}
	url := strings.Fields(line[strings.Index(line, "http://"):])[0]
	url = strings.TrimSuffix(url, ";")
	body := strings.NewReader(`{"model":"sim-7b","prompt":"hi","max_tokens":2,"stream":true}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions", body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	head := strings.Join(resp.Header.Values("Server-Timing"), ", ")
	for _, name := range []string{"proxy;dur=", "headers;dur=", "tokenize;dur="} {
		if !strings.Contains(head, name) {
			t.Errorf("Server-Timing header %q lacks %s", head, name)
		}
	}
	if trailer := resp.Trailer.Get("Server-Timing"); !strings.Contains(trailer, "first_frame;dur=") {
		t.Errorf("Server-Timing trailer %q lacks first_frame", trailer)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("sim: %v", err)
	}
}
