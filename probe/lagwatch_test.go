package probe

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/latscope/latscope/event"
)

// A request counts as unstamped until a read proves its connection keeps
// kernel times; a stamped read late on its bytes' arrival is a stretch.
func TestLagRequestReads(t *testing.T) {
	t.Parallel()
	w := newLagWatch()
	lr := w.begin()
	if w.unstamped.Load() != 1 || len(w.changed) != 1 {
		t.Fatalf("begin: %d unstamped, %d nudges", w.unstamped.Load(), len(w.changed))
	}
	<-w.changed
	t0 := time.Unix(1000, 0)
	lr.read(t0, t0.Add(20*time.Millisecond), false) // no kernel time: proves nothing
	if w.unstamped.Load() != 1 || len(w.stretches) != 0 {
		t.Fatalf("unstamped read: %d unstamped, %d stretches", w.unstamped.Load(), len(w.stretches))
	}
	lr.read(t0, t0.Add(time.Millisecond), true) // on time
	if w.unstamped.Load() != 0 || len(w.changed) != 1 || len(w.stretches) != 0 {
		t.Fatalf("stamped read: %d unstamped, %d nudges, %d stretches", w.unstamped.Load(), len(w.changed), len(w.stretches))
	}
	lr.read(t0, t0.Add(20*time.Millisecond), true) // 20 ms after its bytes arrived
	if s := <-w.stretches; s != (event.Stretch{From: t0, To: t0.Add(20 * time.Millisecond)}) {
		t.Fatalf("late read: stretch %+v", s)
	}
	lr.end()
	if w.unstamped.Load() != 0 {
		t.Fatalf("end after a stamped read: %d unstamped", w.unstamped.Load())
	}
	for range lagStretchBuffer + 3 {
		lr.read(t0, t0.Add(time.Second), true)
	}
	if len(w.stretches) != lagStretchBuffer || w.dropped.Load() != 3 {
		t.Fatalf("a full buffer: %d kept, %d dropped", len(w.stretches), w.dropped.Load())
	}
	var none *lagWatch
	nl := none.begin()
	nl.read(t0, t0.Add(time.Second), true)
	nl.end()
}

// The timed checks run while a request is unstamped, find a stretch the
// clock skipped, and stop once the request's reads prove stamped.
func TestWatchLagTicksOnlyWhileUnstamped(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var skip atomic.Int64 // how far the check's clock is ahead: a held-up probe
		var calls atomic.Int64
		clock := func() time.Time { calls.Add(1); return time.Now().Add(time.Duration(skip.Load())) }
		r := &Runner{cfg: LoadConfig{LagSample: 5 * time.Millisecond, LagClock: clock}, lag: newLagWatch()}
		out := make(chan emitItem, 16)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { r.watchLag(ctx, out) })

		time.Sleep(time.Second)
		synctest.Wait()
		if n := calls.Load(); n != 0 {
			t.Fatalf("no request in flight: %d checks", n)
		}
		lr := r.lag.begin()
		time.Sleep(50 * time.Millisecond)
		synctest.Wait()
		if n := calls.Load(); n < 5 {
			t.Fatalf("an unstamped request in flight: %d checks in 50 ms", n)
		}
		skip.Store(int64(30 * time.Millisecond))
		time.Sleep(5 * time.Millisecond)
		synctest.Wait()
		if it := <-out; it.late == nil || it.late.To.Sub(it.late.From) < 30*time.Millisecond {
			t.Fatalf("the clock skipped 30 ms: %+v", it)
		}
		now := time.Now()
		lr.read(now.Add(-20*time.Millisecond), now, true)
		synctest.Wait()
		if it := <-out; it.late == nil || it.late.To != now {
			t.Fatalf("a stamped read 20 ms late: %+v", it)
		}
		n := calls.Load()
		time.Sleep(time.Second)
		synctest.Wait()
		if calls.Load() != n {
			t.Fatalf("stamped: %d checks in a second", calls.Load()-n)
		}
		cancel()
		wg.Wait()
	})
}
