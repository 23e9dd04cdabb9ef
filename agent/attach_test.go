package agent

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

func waitCut(t *testing.T, p *cutProxy) {
	t.Helper()
	select {
	case <-p.cut:
	case <-time.After(wait):
		t.Fatal("the proxy never cut the connection")
	}
}

func TestAttachResumesAfterAShortCutWithoutLossOrDuplicates(t *testing.T) {
	t.Parallel()
	a := startAgent(t, Config{Ring: RingConfig{MaxEvents: 1000}})
	want := publishAll(t, a.Server, sessionEvent("rack-7"))
	want = append(want, publishAll(t, a.Server, requests(0, 100)...)...)

	p := newCutProxy(t, a.addr, 150_000) // about a third of the way, mid-event
	c := attach(t, ClientConfig{URL: p.url()})
	waitCut(t, p)
	st := c.untilState(t, Reconnecting)
	if st.LastID == 0 || st.LastID >= 101 {
		t.Fatalf("the cut came after event %d of 101: want it mid-stream", st.LastID)
	}
	// Published during the outage: the ring holds them for the client.
	want = append(want, publishAll(t, a.Server, requests(100, 200)...)...)
	p.up()
	c.untilState(t, Streaming)
	want = append(want, publishAll(t, a.Server, requests(300, 50)...)...)
	a.End()

	got, err := c.finish(t)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	sameEvents(t, got, want)
	st = c.Status()
	if st.State != Ended || st.Lost != 0 || st.Duplicates != 0 || st.Connections < 2 || st.Name != "rack-7" {
		t.Fatalf("status %+v: want ended, nothing lost or repeated, two connections at least, named by the header", st)
	}
}

func TestAttachAfterACutLongerThanTheRingGetsAnExactGap(t *testing.T) {
	t.Parallel()
	a := startAgent(t, Config{Ring: RingConfig{MaxEvents: 50}})
	published := publishAll(t, a.Server, sessionEvent("rack-7"))
	published = append(published, publishAll(t, a.Server, requests(0, 40)...)...) // ids 1 to 41

	p := newCutProxy(t, a.addr, 60_000)
	c := attach(t, ClientConfig{URL: p.url()})
	waitCut(t, p)
	last := int(c.untilState(t, Reconnecting).LastID)
	if last == 0 || last >= 41 {
		t.Fatalf("the cut came after event %d of 41: want it mid-stream", last)
	}
	published = append(published, publishAll(t, a.Server, requests(40, 100)...)...) // ids 42 to 141; the ring keeps 92 to 141
	p.up()
	a.End()

	got, err := c.finish(t)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(got) != last+1+50 {
		t.Fatalf("got %d events, want the %d before the cut, one gap record and the 50 the ring holds", len(got), last)
	}
	sameEvents(t, got[:last], published[:last])
	gap := got[last].Loss
	if gap == nil || gap.Events != int64(91-last) || gap.Consumer != gapConsumer || gap.Reason == "" {
		t.Fatalf("got %+v, want a gap record of exactly %d events with a reason", got[last], 91-last)
	}
	sameEvents(t, got[last+1:], published[91:])
	if st := c.Status(); st.Lost != int64(91-last) || st.Duplicates != 0 {
		t.Fatalf("status %+v: want the gap counted", st)
	}

	// A new client still learns what it watches: the header comes first.
	fresh := attach(t, ClientConfig{URL: a.url})
	got, err = fresh.finish(t)
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, got, append(published[:1:1], published[91:]...))
}

func TestAttachStartsAfreshWhenTheAgentRestarted(t *testing.T) {
	t.Parallel()
	first := startAgent(t, Config{})
	before := publishAll(t, first.Server, append([]event.Event{sessionEvent("run-a")}, requests(0, 5)...)...)
	p := newCutProxy(t, first.addr, 0)
	c := attach(t, ClientConfig{URL: p.url()})
	var got []event.Event
	for range before {
		got = append(got, <-c.events)
	}
	// The agent restarts (a new process numbering its events from 1) and
	// has published more than the client had when it comes back.
	second := startAgent(t, Config{})
	after := publishAll(t, second.Server, append([]event.Event{sessionEvent("run-b")}, requests(100, 10)...)...)
	p.retarget(second.addr)
	p.cutNow()
	p.up()
	second.End()
	rest, err := c.finish(t)
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, append(got, rest...), append(before, after...))
	if st := c.Status(); st.Restarts != 1 || st.Name != "run-b" {
		t.Fatalf("status %+v: want one restart noticed", st)
	}
}

func TestAttachStopsWhenCancelledEvenWhileTheAgentIsDown(t *testing.T) {
	t.Parallel()
	a := startAgent(t, Config{})
	p := newCutProxy(t, a.addr, 0)
	p.cutNow() // down from the start: every connection is refused
	c, err := NewClient(ClientConfig{URL: p.url(), Backoff: Backoff{Initial: time.Millisecond, Max: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var reconnecting sync.Once
	retrying := make(chan struct{})
	c.cfg.OnState = func(s Status) {
		if s.State == Reconnecting {
			reconnecting.Do(func() { close(retrying) })
		}
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, func(event.Event) {}) }()
	<-retrying
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel = %v, want nil", err)
		}
	case <-time.After(wait):
		t.Fatal("Run kept retrying after its context ended")
	}
	if st := c.Status(); st.State != Stopped {
		t.Fatalf("state %v, want stopped", st.State)
	}
}

func TestAttachFailsClearlyOnSomethingThatIsNotAnAgent(t *testing.T) {
	t.Parallel()
	a := startAgent(t, Config{})
	c := attach(t, ClientConfig{URL: a.url + "/healthz"})
	_, err := c.finish(t)
	if !errors.Is(err, ErrProtocol) {
		t.Fatalf("Run = %v, want ErrProtocol", err)
	}
	if st := c.Status(); st.State != Failed || st.Err == "" {
		t.Fatalf("status %+v: want failed with the reason", st)
	}
}
