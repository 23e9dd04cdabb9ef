package recorder

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// pacedFile writes a recording whose events are out of time order, as live
// ones are: the request, stamped at its start, is recorded after a later
// marker. Its emit times are t0, +100ms, +100ms, +1s, +2.5s.
func pacedFile(t *testing.T) (string, []event.Event) {
	t.Helper()
	marker := func(d time.Duration) event.Event {
		return event.NewMarker(&event.Marker{Time: t0.Add(d), Kind: event.MarkerNote, Message: d.String()})
	}
	req := everyKind(t0.Add(50 * time.Millisecond))[0]
	evs := []event.Event{marker(100 * time.Millisecond), req, marker(time.Second), marker(2500 * time.Millisecond)}
	rec := buildRecording(t, evs[:2], evs[2:])
	path := filepath.Join(t.TempDir(), "paced.jsonl.zst")
	if err := os.WriteFile(path, rec.data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, rec.all()
}

// emitted is what a replay emitted, and when by its clock.
type emitted struct {
	events []event.Event
	at     []time.Duration // since the replay started
}

func replay(t *testing.T, rp *Replay, clock Clock, during func(i int)) (emitted, error) {
	t.Helper()
	var got emitted
	start := clock.Now()
	err := rp.Run(context.Background(), func(ev event.Event) {
		got.events = append(got.events, ev)
		got.at = append(got.at, clock.Now().Sub(start))
		if during != nil {
			during(len(got.events) - 1)
		}
	})
	return got, err
}

func TestReplayPacing(t *testing.T) {
	t.Parallel()
	path, all := pacedFile(t)
	ms := time.Millisecond
	for _, tc := range []struct {
		speed float64
		want  []time.Duration
	}{
		{1, []time.Duration{0, 100 * ms, 100 * ms, 1000 * ms, 2500 * ms}},
		{10, []time.Duration{0, 10 * ms, 10 * ms, 100 * ms, 250 * ms}},
		{MaxSpeed, []time.Duration{0, 0, 0, 0, 0}},
	} {
		clock := &jumpClock{now: t0}
		got, err := replay(t, NewReplay(path, ReplayOptions{Speed: tc.speed, Clock: clock}), clock, nil)
		if err != nil {
			t.Fatalf("speed %v: %v", tc.speed, err)
		}
		sameEvents(t, got.events, all)
		if !equalDurations(got.at, tc.want) {
			t.Errorf("speed %v: emitted at %v, want %v", tc.speed, got.at, tc.want)
		}
		if tc.speed == MaxSpeed && clock.Waits() != 0 {
			t.Errorf("max speed waited %d times, want never", clock.Waits())
		}
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestReplayFrom skips to a time: what comes before it is emitted at once,
// and pacing starts there.
func TestReplayFrom(t *testing.T) {
	t.Parallel()
	path, all := pacedFile(t)
	clock := &jumpClock{now: t0}
	rp := NewReplay(path, ReplayOptions{Speed: 1, From: t0.Add(900 * time.Millisecond), Clock: clock})
	got, err := replay(t, rp, clock, nil)
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, got.events, all)
	want := []time.Duration{0, 0, 0, 100 * time.Millisecond, 1600 * time.Millisecond}
	if !equalDurations(got.at, want) {
		t.Errorf("emitted at %v, want %v", got.at, want)
	}
	if pos := rp.Position(); !pos.Equal(t0.Add(2500 * time.Millisecond)) {
		t.Errorf("Position() = %v, want the last event's time", pos)
	}
}

// TestReplayPauseAndSpeed pauses after the second event for an hour of
// clock time, which does not count, then plays the rest at ten times.
func TestReplayPauseAndSpeed(t *testing.T) {
	t.Parallel()
	path, all := pacedFile(t)
	clock := &jumpClock{now: t0}
	rp := NewReplay(path, ReplayOptions{Speed: 1, Clock: clock})
	paused := make(chan struct{})
	done := make(chan struct{})
	var got emitted
	var err error
	go func() {
		defer close(done)
		got, err = replay(t, rp, clock, func(i int) {
			if i == 1 {
				rp.Pause(true)
				close(paused)
			}
		})
	}()
	<-paused
	clock.Advance(time.Hour)
	rp.SetSpeed(10)
	rp.Pause(false)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, got.events, all)
	ms := time.Millisecond
	resumed := time.Hour + 100*ms
	want := []time.Duration{0, 100 * ms, resumed, resumed + 90*ms, resumed + 240*ms}
	if !equalDurations(got.at, want) {
		t.Errorf("emitted at %v, want %v", got.at, want)
	}
}

func TestReplayStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	path, _ := pacedFile(t)
	clock := newManualClock() // never advanced: the replay waits for ever
	rp := NewReplay(path, ReplayOptions{Clock: clock})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	n := 0
	go func() { done <- rp.Run(ctx, func(event.Event) { n++ }) }()
	<-clock.armed // waiting for the second event
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if n != 1 {
		t.Errorf("emitted %d events before the cancel, want 1", n)
	}
}

func TestReplayTornFile(t *testing.T) {
	t.Parallel()
	rec := smallRecording(t)
	cut := rec.frames[3] + 5 // inside the last frame
	path := filepath.Join(t.TempDir(), "torn.jsonl.zst")
	if err := os.WriteFile(path, rec.data[:cut], 0o600); err != nil {
		t.Fatal(err)
	}
	n := 0
	err := NewReplay(path, ReplayOptions{Speed: MaxSpeed}).Run(context.Background(), func(event.Event) { n++ })
	var torn *TornTailError
	if !errors.As(err, &torn) || torn.Offset != rec.frames[3] {
		t.Fatalf("Run = %v, want a torn tail at %d", err, rec.frames[3])
	}
	if want := countEvents(rec, 3); n != want {
		t.Errorf("emitted %d events, want the %d of the complete frames", n, want)
	}
}
