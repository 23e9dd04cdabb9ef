package sim

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"
)

func TestClientDisconnectFreesSlot(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	var once sync.Once
	finished := make(chan Truth, 1)
	s, url := startServer(t, Config{Profile: tinyProfile(t),
		OnFrame:  func(FrameInfo) { once.Do(func() { close(started) }) },
		OnFinish: func(tr Truth) { finished <- tr },
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan streamResult, 1)
	go func() { done <- post(ctx, url, "/v1/chat/completions", chatBody("hi", 5000, true), nil) }()
	// A frame means a finished step: the step figures are all set.
	waitClosed(t, testCtx(t, 10*time.Second), started, "the first frame")
	if st := s.Stats(); st.Running != 1 || st.KVUsage == 0 || st.BatchSize != 1 || st.StepsPerSec == 0 || st.Busy == 0 {
		t.Errorf("stats while decoding = %+v", st)
	}
	cancel()
	<-done
	if tr := <-finished; tr.FinishReason != "abort" {
		t.Errorf("finish reason = %q, want abort", tr.FinishReason)
	}
	// The engine drops the aborted sequence at its next step; no event
	// reports that, so poll.
	waitFor(t, func() bool { return s.Stats().Running == 0 && s.Stats().KVUsage == 0 })
}

func TestServeStopsMidStream(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	var once sync.Once
	s, err := New(Config{Profile: tinyProfile(t), OnFrame: func(FrameInfo) { once.Do(func() { close(started) }) }})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	res := make(chan streamResult, 1)
	go func() {
		res <- post(testCtx(t, 20*time.Second), "http://"+ln.Addr().String(), "/v1/chat/completions", chatBody("hi", 5000, true), nil)
	}()
	waitClosed(t, testCtx(t, 10*time.Second), started, "the first frame")
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if r := <-res; r.done {
		t.Error("stream finished despite the shutdown")
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{MaxNumSeqs: -1},
		{TokenizerPool: -2},
		{FaultRate: 1.5},
		{Profile: Profile{Name: "broken"}},
	} {
		if s, err := New(cfg); err == nil {
			s.Close()
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
	if _, err := ProfileByName("a100"); err == nil {
		t.Error("ProfileByName accepted an unknown profile")
	}
}

// waitFor polls engine state that no event reports until cond holds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
