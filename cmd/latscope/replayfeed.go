package main

import (
	"context"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/recorder"
	"github.com/latscope/latscope/session"
	"github.com/latscope/latscope/tui"
)

// newReplayFeed drives the dashboard from the recording at path, with
// pause and seek (tui.ReplayFeed): each pass is a replay of the file
// through a measurement of its own.
func newReplayFeed(ctx context.Context, path string, speed float64) *tui.ReplayFeed {
	start := func(ctx context.Context, from time.Time, paused bool) tui.ReplayPass {
		return startReplayPass(ctx, path, speed, from, paused)
	}
	span := func(ctx context.Context) (time.Time, time.Time, error) { return recordingSpan(ctx, path) }
	return tui.NewReplayFeed(ctx, speed, start, span)
}

// replayPass is one pass over the recording.
type replayPass struct {
	feed   *tui.LiveFeed
	replay *recorder.Replay
	stop   context.CancelFunc
	done   chan struct{}
	// summary is the pass's summary so far, set before done closes.
	summary aggregate.Summary
}

// startReplayPass begins a pass that plays path from `from` (the zero
// time: the start).
func startReplayPass(ctx context.Context, path string, speed float64, from time.Time, paused bool) *replayPass {
	ctx, stop := context.WithCancel(ctx)
	run := &replayPass{
		replay: recorder.NewReplay(path, recorder.ReplayOptions{Speed: speed, From: from, Paused: paused}),
		stop:   stop,
		done:   make(chan struct{}),
	}
	snaps := pipeline.NewLatest[aggregate.Snapshot]()
	feeds := make(chan *tui.LiveFeed, 1)
	m := session.Measurement{
		Pipe:      pipeline.Config{Primary: []pipeline.Source{run.replay}},
		Observers: []func(aggregate.Snapshot){snaps.Put},
		Consumers: []session.Consumer{session.DashboardFeed{Snaps: snaps, Feeds: feeds}},
	}
	go func() {
		defer close(run.done)
		run.summary, _, _ = m.Run(ctx) // a torn tail was reported before the dashboard opened
	}()
	run.feed = <-feeds
	return run
}

func (p *replayPass) Frame() (tui.Frame, uint64) { return p.feed.Frame() }
func (p *replayPass) Position() time.Time        { return p.replay.Position() }
func (p *replayPass) Pause(paused bool)          { p.replay.Pause(paused) }

// Stop stops the pass and waits for it; a second call returns at once.
func (p *replayPass) Stop() aggregate.Summary {
	p.stop()
	<-p.done
	return p.summary
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
