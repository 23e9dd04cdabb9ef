package main

import (
	"context"
	"sync"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/recorder"
	"github.com/latscope/latscope/tui"
)

// replayFeed drives the dashboard from a recording, with pause and seek. A
// seek starts the aggregation afresh: the recording is read again from its
// start, the events before the target at full speed, and paced from there,
// so every window and chart is what the live run showed at that moment.
type replayFeed struct {
	path  string
	speed float64

	restartMu sync.Mutex // one restart at a time, in order
	mu        sync.Mutex
	cur       *replayRun
	gen       uint64 // restarts so far: a new run's frames are new versions
	paused    bool

	// span is the recording's first and last event times, read once on
	// its own goroutine (a large file takes a while); zero until then.
	span     [2]time.Time
	stopSpan context.CancelFunc
	spanDone chan struct{}
}

// replayRun is one pass over the recording.
type replayRun struct {
	replay *recorder.Replay
	feed   *tui.LiveFeed
	stop   context.CancelFunc
	done   chan struct{}
	// summary is the pass's summary so far, set before done closes.
	summary aggregate.Summary
}

var (
	_ tui.Pauser = (*replayFeed)(nil)
	_ tui.Seeker = (*replayFeed)(nil)
)

func newReplayFeed(ctx context.Context, path string, speed float64) *replayFeed {
	f := &replayFeed{path: path, speed: speed, spanDone: make(chan struct{})}
	spanCtx, stop := context.WithCancel(ctx)
	f.stopSpan = stop
	go func() {
		defer close(f.spanDone)
		if first, last, err := recordingSpan(spanCtx, path); err == nil {
			f.mu.Lock()
			f.span = [2]time.Time{first, last}
			f.gen++ // the length is news for the screen
			f.mu.Unlock()
		}
	}()
	f.cur = f.start(ctx, time.Time{}, false)
	return f
}

// recordingSpan reads a recording through for its first and last event
// times (events are stored in end order, so the last is the latest seen).
func recordingSpan(ctx context.Context, path string) (first, last time.Time, err error) {
	rd, err := recorder.Open(path)
	if err != nil {
		return first, last, err
	}
	defer rd.Close()
	for ctx.Err() == nil {
		ev, err := rd.Next()
		if err != nil {
			return first, last, nil // the end, or a torn tail: what was read stands
		}
		at := ev.Time()
		if at.IsZero() {
			continue
		}
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	return first, last, ctx.Err()
}

// start begins a pass that plays from `from` (the zero time: the start).
func (f *replayFeed) start(ctx context.Context, from time.Time, paused bool) *replayRun {
	ctx, stop := context.WithCancel(ctx)
	run := &replayRun{
		replay: recorder.NewReplay(f.path, recorder.ReplayOptions{Speed: f.speed, From: from, Paused: paused}),
		stop:   stop,
		done:   make(chan struct{}),
	}
	snaps := pipeline.NewLatest[aggregate.Snapshot]()
	feeds := make(chan *tui.LiveFeed, 1)
	m := measurement{
		pipe:      pipeline.Config{Primary: []pipeline.Source{run.replay}},
		observers: []func(aggregate.Snapshot){snaps.Put},
		consumers: []consumer{dashboardFeed{snaps: snaps, feeds: feeds}},
	}
	go func() {
		defer close(run.done)
		run.summary, _, _ = m.run(ctx) // a torn tail was reported before the dashboard opened
	}()
	run.feed = <-feeds
	return run
}

// Frame returns the current pass's frame with where the playhead is.
func (f *replayFeed) Frame() (tui.Frame, uint64) {
	f.mu.Lock()
	cur, gen, span, paused := f.cur, f.gen, f.span, f.paused
	f.mu.Unlock()
	fr, v := cur.feed.Frame()
	begin := fr.Snapshot.Now.Add(-fr.Snapshot.Elapsed) // the session's start
	pb := &tui.Playback{Speed: f.speed, Paused: paused}
	if at := cur.replay.Position(); !at.IsZero() && !fr.Snapshot.Now.IsZero() {
		pb.Position = max(at.Sub(begin), 0)
	}
	if !span[1].IsZero() && !fr.Snapshot.Now.IsZero() {
		pb.Length = max(span[1].Sub(begin), pb.Position)
	}
	fr.Playback = pb
	return fr, gen<<40 | v
}

// TogglePause pauses or resumes playback.
func (f *replayFeed) TogglePause() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paused = !f.paused
	f.cur.replay.Pause(f.paused)
	return f.paused
}

// Seek moves the playhead by `by`; it returns at once and the new position
// shows in a later frame.
func (f *replayFeed) Seek(by time.Duration) {
	f.mu.Lock()
	target := f.cur.replay.Position().Add(by)
	f.mu.Unlock()
	go f.restart(target)
}

func (f *replayFeed) restart(target time.Time) {
	f.restartMu.Lock()
	defer f.restartMu.Unlock()
	f.mu.Lock()
	old, paused := f.cur, f.paused
	f.mu.Unlock()
	old.stop()
	<-old.done
	next := f.start(context.Background(), target, paused)
	f.mu.Lock()
	f.cur, f.gen = next, f.gen+1
	f.mu.Unlock()
}

// Close stops the current pass, waits for it and returns its summary up to
// where it stopped (what an interrupted replay prints).
func (f *replayFeed) Close() aggregate.Summary {
	f.restartMu.Lock()
	defer f.restartMu.Unlock()
	f.mu.Lock()
	cur := f.cur
	f.mu.Unlock()
	cur.stop()
	<-cur.done
	f.stopSpan()
	<-f.spanDone
	return cur.summary
}
