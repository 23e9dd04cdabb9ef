package probe

import (
	"context"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// The watch reports the stretches between a check and the one before it
// when the later one came over an interval and lateBy after it.
func TestWatchLag(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// Checks at these offsets, one every 5 ms but for a 40 ms hold and a
	// 4 ms delay (no more than a busy machine's timer).
	checks := []time.Duration{5 * ms, 10 * ms, 50 * ms, 55 * ms, 64 * ms, 69 * ms}
	ticks := make(chan time.Time)
	clock := make(chan time.Time, len(checks)+1)
	clock <- t0
	for _, c := range checks {
		clock <- t0.Add(c)
	}
	var got []event.Stretch
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchLag(ctx, ticks, func() time.Time { return <-clock }, 5*ms, func(from, to time.Time) { got = append(got, event.Stretch{From: from, To: to}) })
	}()
	for range checks {
		ticks <- time.Time{}
	}
	cancel()
	<-done
	want := []event.Stretch{{From: t0.Add(10 * ms), To: t0.Add(50 * ms)}}
	if len(got) != len(want) || got[0] != want[0] {
		t.Fatalf("late stretches %v, want %v", got, want)
	}
}
