package session

import (
	"context"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/tui"
)

// Screen shows a dashboard fed by feed until the user quits or ctx ends.
// The command line's saves the terminal first (tui.Run, in tests).
type Screen func(ctx context.Context, feed tui.Feed, opts tui.Options) error

// RunWithDashboard runs m while screen shows it, until the user quits (q,
// Ctrl-C) or ctx ends; quitting stops measuring, and every request in
// flight still ends in exactly one outcome. It returns the run's summary,
// for the caller to print once the terminal is restored, and whether ctx
// (a signal) interrupted it.
func RunWithDashboard(ctx context.Context, m Measurement, screen Screen, notices *tui.NoticeBoard, opts tui.Options) (aggregate.Summary, bool, error) {
	snaps := pipeline.NewLatest[aggregate.Snapshot]()
	m.Observers = append(m.Observers, snaps.Put)
	feeds := make(chan *tui.LiveFeed, 1)
	m.Consumers = append(m.Consumers, DashboardFeed{Snaps: snaps, Feeds: feeds})

	measureCtx, stopMeasuring := context.WithCancelCause(ctx)
	defer stopMeasuring(nil)
	type result struct {
		summary     aggregate.Summary
		interrupted bool
		err         error
	}
	done := make(chan result, 1)
	go func() {
		s, interrupted, err := m.Run(measureCtx)
		done <- result{s, interrupted, err}
	}()
	feed := <-feeds // the consumers start before the pipeline does
	uiErr := screen(ctx, tui.WithNotices(feed, notices), opts)
	notices.Detach() // what the end waits for is said on the restored terminal
	// Quitting is the run's own end: the requests in flight are cancelled
	// at the end of the run, not errors (unless ctx, a signal, ended first).
	stopMeasuring(pipeline.ErrRunEnded)
	res := <-done
	if ctx.Err() == nil {
		res.interrupted = false // quitting the dashboard is how a run ends
	}
	if uiErr != nil && res.err == nil {
		res.err = uiErr
	}
	return res.summary, res.interrupted, res.err
}

// DashboardFeed is the dashboard's feed of the aggregator's snapshots (the
// requests view's sample is in them), a consumer that hands Feeds one
// live feed when it starts. The screen never holds up measuring.
type DashboardFeed struct {
	Snaps *pipeline.Latest[aggregate.Snapshot]
	Feeds chan<- *tui.LiveFeed
}

// Start hands over the live feed; there is nothing to wait for.
func (d DashboardFeed) Start(context.Context, *pipeline.Fanout) func() error {
	d.Feeds <- tui.NewLiveFeed(d.Snaps)
	return func() error { return nil }
}
