package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/recorder"
	"github.com/latscope/latscope/tui"
)

// ReplayConfig is one replay of a recording.
type ReplayConfig struct {
	// Arg is the recording as given: a path, or "-" for Stdin.
	Arg   string
	Stdin io.Reader
	// Speed is the playback's factor (recorder.MaxSpeed: as fast as read).
	Speed float64
	JSON  bool
	// Screen, when set, plays the recording on the dashboard, with pause
	// and seek, and then prints the whole recording's summary.
	Screen Screen
	View   tui.Options
}

// Replay plays a recording back through the aggregator, on its own
// timestamps, prints the summary on stdout and returns the exit reason
// the recorded run gave (or Interrupted): the whole of `latscope replay`
// after its flags.
func Replay(ctx context.Context, stdout, stderr io.Writer, c ReplayConfig) error {
	path, name, cleanup, err := recordingArg(ctx, c.Stdin, c.Arg)
	if err != nil {
		return err
	}
	defer cleanup()
	// Open once up front: a file that is not a recording, or from
	// another version, fails here with a clear message.
	rd, err := recorder.Open(path)
	if err != nil {
		if name != path {
			return fmt.Errorf("%s: %w", name, err)
		}
		return err
	}
	rd.Close()
	if c.Screen != nil {
		feed := newReplayFeed(ctx, path, c.Speed)
		err := c.Screen(ctx, feed, c.View)
		soFar := feed.Close()
		if err != nil {
			return err
		}
		if ctx.Err() != nil { // a signal: the summary up to the playhead
			return errors.Join(writeSummary(stdout, soFar, c.JSON),
				Exit(Interrupted, errors.New("interrupted: the summary covers the recording up to the playhead")))
		}
		c.Speed = recorder.MaxSpeed // then the whole file's summary, as --no-tui prints it
	}
	replay := recorder.NewReplay(path, recorder.ReplayOptions{Speed: c.Speed, Name: name})
	m := Measurement{Pipe: pipeline.Config{Primary: []pipeline.Source{replay}}}
	summary, interrupted, err := m.Run(ctx)
	if n := replay.Duplicates(); n > 0 {
		fmt.Fprintf(stderr, "latscope: warning: %s: %s\n", name, aggregate.DuplicatesNote(n))
		summary.DuplicatesIgnored = n
	}
	var torn *recorder.TornTailError
	if errors.As(err, &torn) {
		fmt.Fprintf(stderr, "latscope: warning: %s: %v; the summary covers everything before it\n", name, torn)
		err = withoutTorn(err)
	}
	interrupted = interrupted || ctx.Err() != nil
	if interrupted { // a signal: what it cancelled is no failure, the summary so far is printed
		err = WithoutCancellation(err)
	}
	if err != nil {
		return err
	}
	err = writeSummary(stdout, summary, c.JSON)
	switch {
	case err != nil:
	case interrupted:
		err = Exit(Interrupted, errors.New("interrupted: the summary covers the recording up to there"))
	default: // the exit code the recorded run gave
		err = RecordedOutcome(stderr, summary)
	}
	return err
}

// withoutTorn removes a torn-tail warning from err (it was reported).
func withoutTorn(err error) error {
	return DropErrors(err, func(e error) bool {
		var torn *recorder.TornTailError
		return errors.As(e, &torn)
	})
}

// writeSummary prints s as a table, or as JSON.
func writeSummary(w io.Writer, s aggregate.Summary, jsonOut bool) error {
	if jsonOut {
		return aggregate.WriteJSON(w, s)
	}
	return aggregate.WriteTable(w, s)
}

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
	m := Measurement{
		Pipe:      pipeline.Config{Primary: []pipeline.Source{run.replay}},
		Observers: []func(aggregate.Snapshot){snaps.Put},
		Consumers: []Consumer{DashboardFeed{Snaps: snaps, Feeds: feeds}},
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
