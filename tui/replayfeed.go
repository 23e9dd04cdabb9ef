package tui

import (
	"context"
	"sync"
	"time"

	"github.com/latscope/latscope/aggregate"
)

// ReplayPass is one pass over a recording, playing it from some point
// through the aggregator: the dashboard's frames, the playhead, pause, and
// its end. The caller builds it (the recording and the aggregation are not
// the screen's business); ReplayFeed starts one per seek.
type ReplayPass interface {
	Feed
	// Position is the time of the last event played; zero before the first.
	Position() time.Time
	// Pause pauses or resumes the playback; it returns at once.
	Pause(paused bool)
	// Stop stops the pass, waits for it and returns its summary up to
	// where it stopped.
	Stop() aggregate.Summary
}

// StartReplayPass starts a pass that plays from `from` (the zero time: the
// start), paused or not, until ctx ends or the recording does.
type StartReplayPass func(ctx context.Context, from time.Time, paused bool) ReplayPass

// RecordingSpan reads a recording's first and last event times; it may
// take a while (a large file), and returns ctx's error when ctx ends first.
type RecordingSpan func(ctx context.Context) (first, last time.Time, err error)

// ReplayFeed drives the dashboard from a recording, with pause and seek. A
// seek starts the aggregation afresh: a new pass reads the recording again
// from its start, the events before the target at full speed, and paced
// from there, so every window and chart is what the live run showed at that
// moment.
type ReplayFeed struct {
	speed float64
	start StartReplayPass

	restartMu sync.Mutex // one restart at a time, in order
	mu        sync.Mutex
	cur       ReplayPass
	gen       uint64 // restarts so far: a new pass's frames are new versions
	paused    bool

	// span is the recording's first and last event times, read once on
	// its own goroutine (a large file takes a while); zero until then.
	span     [2]time.Time
	stopSpan context.CancelFunc
	spanDone chan struct{}
}

var (
	_ Pauser = (*ReplayFeed)(nil)
	_ Seeker = (*ReplayFeed)(nil)
)

// NewReplayFeed starts the first pass, from the recording's start, at
// speed (as the passes play it), and reads the recording's span on a
// goroutine that Close stops and waits for.
func NewReplayFeed(ctx context.Context, speed float64, start StartReplayPass, span RecordingSpan) *ReplayFeed {
	f := &ReplayFeed{speed: speed, start: start, spanDone: make(chan struct{})}
	spanCtx, stop := context.WithCancel(ctx)
	f.stopSpan = stop
	go func() {
		defer close(f.spanDone)
		if first, last, err := span(spanCtx); err == nil {
			f.mu.Lock()
			f.span = [2]time.Time{first, last}
			f.gen++ // the length is news for the screen
			f.mu.Unlock()
		}
	}()
	f.cur = start(ctx, time.Time{}, false)
	return f
}

// Frame returns the current pass's frame with where the playhead is.
func (f *ReplayFeed) Frame() (Frame, uint64) {
	f.mu.Lock()
	cur, gen, span, paused := f.cur, f.gen, f.span, f.paused
	f.mu.Unlock()
	fr, v := cur.Frame()
	begin := fr.Snapshot.Now.Add(-fr.Snapshot.Elapsed) // the session's start
	pb := &Playback{Speed: f.speed, Paused: paused}
	if at := cur.Position(); !at.IsZero() && !fr.Snapshot.Now.IsZero() {
		pb.Position = max(at.Sub(begin), 0)
	}
	if !span[1].IsZero() && !fr.Snapshot.Now.IsZero() {
		pb.Length = max(span[1].Sub(begin), pb.Position)
	}
	fr.Playback = pb
	return fr, gen<<40 | v
}

// TogglePause pauses or resumes playback.
func (f *ReplayFeed) TogglePause() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paused = !f.paused
	f.cur.Pause(f.paused)
	return f.paused
}

// Seek moves the playhead by `by`; it returns at once and the new position
// shows in a later frame.
func (f *ReplayFeed) Seek(by time.Duration) {
	f.mu.Lock()
	target := f.cur.Position().Add(by)
	f.mu.Unlock()
	go f.restart(target)
}

func (f *ReplayFeed) restart(target time.Time) {
	f.restartMu.Lock()
	defer f.restartMu.Unlock()
	f.mu.Lock()
	old, paused := f.cur, f.paused
	f.mu.Unlock()
	old.Stop()
	next := f.start(context.Background(), target, paused)
	f.mu.Lock()
	f.cur, f.gen = next, f.gen+1
	f.mu.Unlock()
}

// Close stops the current pass and the span's reading, waits for both and
// returns the pass's summary up to where it stopped (what an interrupted
// replay prints).
func (f *ReplayFeed) Close() aggregate.Summary {
	f.restartMu.Lock()
	defer f.restartMu.Unlock()
	f.mu.Lock()
	cur := f.cur
	f.mu.Unlock()
	summary := cur.Stop()
	f.stopSpan()
	<-f.spanDone
	return summary
}
