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
