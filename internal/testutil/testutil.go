// Package testutil holds the few helpers that tests of several packages
// share: a buffer safe for a writer and a reader at once, and a small
// recording written with the real recorder. Only tests import it.
package testutil

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/recorder"
)

// SyncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TinyRecording writes dir/name, a recording of 30 requests one a second
// from 2026-01-02 03:04:05 UTC (TTFT 100–106 ms, three tokens 10 ms
// apart), and returns its path.
func TinyRecording(t testing.TB, dir, name string) string {
	t.Helper()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	path := filepath.Join(dir, name)
	w, err := recorder.Create(path, &event.Session{Time: start, Latscope: "test", Name: name, Target: "http://127.0.0.1:8000",
		Load: event.Load{Mode: "closed", Concurrency: 1}}, recorder.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		at := start.Add(time.Duration(i) * time.Second)
		ttft := time.Duration(100+i%7) * time.Millisecond
		r := &event.Request{ID: fmt.Sprintf("ls-test-%d", i), Dialect: "openai-chat", Intended: at, Start: at, Outcome: event.OutcomeOK,
			TTFT: ttft, E2E: ttft + 20*time.Millisecond, OutputTokens: 3,
			Chunks: []event.Chunk{{At: ttft, Tokens: 1}, {At: ttft + 10*time.Millisecond, Tokens: 1}, {At: ttft + 20*time.Millisecond, Tokens: 1}}}
		if err := w.Write(event.NewRequest(r)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
