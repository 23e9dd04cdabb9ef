package tui

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
)

func req(i int, end time.Time, ttft time.Duration) *event.Request {
	e2e := ttft + 100*time.Millisecond
	return &event.Request{ID: fmt.Sprintf("r%03d", i), Intended: end.Add(-e2e), Start: end.Add(-e2e), TTFT: ttft, E2E: e2e, Outcome: event.OutcomeOK}
}

func TestSamplerKeepsLatestAndSlowestPerWindow(t *testing.T) {
	s := NewSampler(3)
	// 300 requests over 5 minutes, one a second; the slowest is early.
	for i := range 300 {
		ttft := time.Duration(10+i%7) * time.Millisecond
		if i == 5 {
			ttft = time.Second
		}
		s.Add(req(i, t0.Add(time.Duration(i)*time.Second), ttft))
	}
	s.Add(&event.Request{ID: "warm", Warmup: true, TTFT: time.Hour})
	got := s.Sample(t0.Add(299 * time.Second))
	if len(got.Latest) != 3 || got.Latest[0].ID != "r299" || got.Latest[2].ID != "r297" {
		t.Fatalf("latest %v, want r299 r298 r297", ids(got.Latest))
	}
	if run := got.Slowest[aggregate.WinRun]; len(run) != 3 || run[0].ID != "r005" {
		t.Errorf("run's slowest %v, want r005 first", ids(run))
	}
	for _, w := range []aggregate.Window{aggregate.Win10s, aggregate.Win1m, aggregate.Win5m} {
		list := got.Slowest[w]
		if len(list) != 3 {
			t.Fatalf("%v: %d slowest, want 3", w, len(list))
		}
		for _, r := range list {
			if r.ID == "r005" && w != aggregate.Win5m {
				t.Errorf("%v lists r005, which ended outside it", w)
			}
			if r.TTFT < list[len(list)-1].TTFT {
				t.Errorf("%v not slowest first: %v", w, ids(list))
			}
		}
	}
}

func ids(rs []*event.Request) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func TestSamplerIsSafeForConcurrentUse(t *testing.T) {
	s := NewSampler(5)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				s.Add(req(g*10000+i, t0.Add(time.Duration(i)*time.Millisecond), time.Duration(i)*time.Microsecond))
			}
		})
	}
	wg.Go(func() {
		for range 200 {
			s.Sample(t0.Add(time.Second))
		}
	})
	wg.Wait()
	if v := s.Version(); v != 8000 {
		t.Fatalf("version %d after 8000 adds", v)
	}
}

func TestLiveFeed(t *testing.T) {
	snaps := pipeline.NewLatest[aggregate.Snapshot]()
	fan := pipeline.NewFanout()
	sub := fan.Subscribe("dashboard", 16, pipeline.Lossy)
	feed := NewLiveFeed(snaps, sub, 5)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { feed.Run(ctx); close(done) }()

	_, v0 := feed.Frame()
	snaps.Put(aggregate.Snapshot{Now: t0.Add(time.Second)})
	fr, v1 := feed.Frame()
	if v1 == v0 || !fr.Snapshot.Now.Equal(t0.Add(time.Second)) {
		t.Fatalf("version %d→%d, snapshot %v: a new snapshot is not a new frame", v0, v1, fr.Snapshot.Now)
	}
	if _, again := feed.Frame(); again != v1 {
		t.Fatal("version changed without new data")
	}
	fan.Publish(event.NewRequest(req(1, t0.Add(time.Second), 5*time.Millisecond)))
	deadline := time.After(10 * time.Second)
	for {
		fr, v := feed.Frame()
		if len(fr.Requests.Latest) == 1 && v != v1 {
			break
		}
		select {
		case <-deadline:
			t.Fatal("the published request never reached the frame")
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop with its context")
	}
}

func TestLiveFeedStopsWhenTheSubscriptionCloses(t *testing.T) {
	fan := pipeline.NewFanout()
	feed := NewLiveFeed(pipeline.NewLatest[aggregate.Snapshot](), fan.Subscribe("d", 1, pipeline.Lossy), 0)
	_, before := feed.Frame()
	fan.Close()
	feed.Run(context.Background()) // returns at once
	fr, after := feed.Frame()
	if !fr.Finished || after == before {
		t.Fatalf("after the session ended: finished %v, version %d → %d; want finished, a new version", fr.Finished, before, after)
	}
}

// A feed whose context ends first (the user quit) was not finished.
func TestLiveFeedCancelledIsNotFinished(t *testing.T) {
	fan := pipeline.NewFanout()
	feed := NewLiveFeed(pipeline.NewLatest[aggregate.Snapshot](), fan.Subscribe("d", 1, pipeline.Lossy), 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	feed.Run(ctx)
	if fr, _ := feed.Frame(); fr.Finished {
		t.Fatal("a cancelled feed says the session finished")
	}
}

// The slowest lists never leave out a request that the latest list shows
// and that is slower than rows they show, even when the snapshot they are
// drawn with is behind the newest requests.
func TestSlowestIncludesRequestsNewerThanTheSnapshot(t *testing.T) {
	s := NewSampler(3)
	at := func(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }
	req := func(id string, end float64, ttft time.Duration) *event.Request {
		return &event.Request{ID: id, Start: at(end).Add(-2 * ttft), TTFT: ttft, E2E: 2 * ttft, Outcome: event.OutcomeOK}
	}
	for i, ttft := range []time.Duration{100, 120, 140, 160} {
		s.Add(req(fmt.Sprintf("old-%d", i), 29+float64(i)/10, ttft*time.Millisecond))
	}
	// Two slow requests end after the snapshot below, in the next 1 s and
	// 10 s slots.
	s.Add(req("new-slow-1", 30.2, 900*time.Millisecond))
	s.Add(req("new-slow-2", 30.4, 800*time.Millisecond))
	sample := s.Sample(at(29.9))
	latest := map[string]bool{}
	for _, r := range sample.Latest {
		latest[r.ID] = true
	}
	for w := range aggregate.NumWindows {
		var ids []string
		for _, r := range sample.Slowest[w] {
			ids = append(ids, r.ID)
		}
		if len(ids) < 2 || ids[0] != "new-slow-1" || ids[1] != "new-slow-2" {
			t.Errorf("%s: slowest %v, want new-slow-1 and new-slow-2 first (the latest list shows them: %v)", w, ids, latest)
		}
	}
}
