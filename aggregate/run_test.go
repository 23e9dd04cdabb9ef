package aggregate

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/latscope/latscope/event"
)

func TestRunUntilInputCloses(t *testing.T) {
	t.Parallel()
	in := make(chan event.Event, 16)
	for i := 0; i < 10; i++ {
		in <- event.NewRequest(okReq(base().Add(time.Duration(i)*time.Second), 50*time.Millisecond, 5*time.Millisecond, 4))
	}
	in <- event.NewServer(&event.ServerSample{Time: base(), Waiting: ptr(3)})
	close(in)

	var published []Snapshot
	done := make(chan Summary, 1)
	go func() {
		done <- New(Config{}).Run(context.Background(), in, time.Hour, func(s Snapshot) { published = append(published, s) })
	}()
	select {
	case sum := <-done:
		if sum.Requests.Sent != 10 || sum.ITL.Count != 30 || sum.Server.QueueDepth.Peak != 3 {
			t.Errorf("summary: sent %d itl %d queue %v", sum.Requests.Sent, sum.ITL.Count, sum.Server.QueueDepth)
		}
		// A final snapshot is published, its windows ending at the last event.
		if len(published) != 1 || published[0].Requests.Sent != 10 || !published[0].Now.Equal(base().Add(9*time.Second+65*time.Millisecond)) {
			t.Errorf("published %d snapshots; last at %v", len(published), published[len(published)-1].Now)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its input closed")
	}
}

func TestRunPublishesOnTickerAndStopsOnCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	in := make(chan event.Event, 4)
	snaps := make(chan Snapshot, 100)
	clock := func() time.Time { return base().Add(time.Minute) }
	done := make(chan Summary, 1)
	go func() {
		done <- New(Config{Now: clock}).Run(ctx, in, time.Millisecond, func(s Snapshot) {
			select {
			case snaps <- s:
			default: // a slow reader misses snapshots, never blocks the aggregator
			}
		})
	}()
	in <- event.NewRequest(okReq(base(), time.Millisecond, 0, 1))
	deadline := time.After(10 * time.Second)
	for got := false; !got; {
		select {
		case s := <-snaps:
			got = s.Requests.Sent == 1 && s.Now.Equal(clock())
		case <-deadline:
			t.Fatal("no snapshot with the request arrived")
		}
	}
	in <- event.NewRequest(okReq(base(), time.Millisecond, 0, 1))
	cancel()
	select {
	case sum := <-done:
		if sum.Requests.Sent < 1 {
			t.Errorf("summary lost requests: %+v", sum.Requests)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

// TestRunPublishesUnchangedSnapshotsTwiceASecond: at 4 Hz, a tick with no
// event since the last snapshot publishes only every other time (2 Hz),
// a tick after an event always.
func TestRunPublishesUnchangedSnapshotsTwiceASecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := make(chan event.Event)
		ctx, cancel := context.WithCancel(t.Context())
		var published int
		done := make(chan struct{})
		go func() {
			defer close(done)
			New(Config{Now: time.Now}).Run(ctx, in, 250*time.Millisecond, func(Snapshot) { published++ })
		}()
		time.Sleep(3*time.Second + 100*time.Millisecond) // 12 ticks, nothing new
		synctest.Wait()
		if published != 6 {
			t.Errorf("idle: %d snapshots in 12 ticks, want 6", published)
		}
		published = 0
		for range 8 { // an event before each of 8 ticks
			in <- event.NewServer(&event.ServerSample{Time: time.Now(), Waiting: ptr(1)})
			time.Sleep(250 * time.Millisecond)
		}
		synctest.Wait()
		if published != 8 {
			t.Errorf("busy: %d snapshots in 8 ticks, want 8", published)
		}
		cancel()
		<-done
	})
}
