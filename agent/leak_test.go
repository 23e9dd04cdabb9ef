package agent

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// TestShutdownStopsEveryGoroutine runs alone (not in parallel), so that the
// goroutine count it compares is its own.
func TestShutdownStopsEveryGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	s, err := New(Config{Listen: ListenConfig{Addr: "127.0.0.1:0"}, WriteTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	events := make(chan event.Event)
	consumed := make(chan error, 1)
	go func() {
		s.Consume(events)
		consumed <- nil
	}()

	// Two clients that read, one that never does (its writer ends up
	// blocked in a write), and one retrying an agent that is not there.
	url := "http://" + ln.Addr().String()
	type running struct {
		got  chan event.Event
		done chan error
	}
	var clients []running
	for _, u := range []string{url, url, "http://127.0.0.1:1"} {
		c, err := NewClient(ClientConfig{URL: u, Backoff: Backoff{Initial: time.Millisecond, Max: time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		r := running{got: make(chan event.Event, 4096), done: make(chan error, 1)}
		go func() { r.done <- c.Run(ctx, func(ev event.Event) { r.got <- ev }) }()
		clients = append(clients, r)
	}
	stuck := stuckClient(t, ln.Addr().String(), "")

	const n = 3000
	events <- sessionEvent("leak")
	for i := range n {
		events <- requestEvent(i)
	}
	for _, r := range clients[:2] {
		for range n + 1 {
			select {
			case <-r.got:
			case <-time.After(wait):
				t.Fatal("a client did not get every event")
			}
		}
	}

	cancel()
	close(events) // the pipeline closes the subscription when the session ends
	for name, ch := range map[string]chan error{"Serve": served, "Consume": consumed} {
		select {
		case <-ch:
		case <-time.After(wait):
			t.Fatalf("%s did not return after cancel", name)
		}
	}
	for i, r := range clients {
		select {
		case err := <-r.done:
			if err != nil {
				t.Fatalf("client %d: %v", i, err)
			}
		case <-time.After(wait):
			t.Fatalf("client %d did not return after cancel", i)
		}
	}
	stuck.Close()

	// Goroutines that were told to stop may take a moment to be gone;
	// wait for them without sleeping, bounded.
	deadline := time.Now().Add(wait)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines left over (%d before):\n%s", runtime.NumGoroutine()-before, before, buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
	}
}
