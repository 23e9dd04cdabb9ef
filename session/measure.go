package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/charmbracelet/x/term"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/internal/textsafe"
	"github.com/latscope/latscope/pipeline"
)

// Consumer is one more reader of the pipeline's fan-out besides the
// aggregator: the recorder, the dashboard's request feed, the agent's
// stream. Start subscribes (before the pipeline runs) and starts the
// consumer; the returned wait blocks until it has taken the last event.
type Consumer interface {
	Start(ctx context.Context, fan *pipeline.Fanout) (wait func() error)
}

// LateReporter is a consumer with events to give the aggregator after the
// stream ended: what it found out while taking the last events (the
// recorder's last frame failing).
type LateReporter interface {
	LateEvents() []event.Event
}

// Measurement is one run of a pipeline with the aggregator and its
// observers (status line, dashboard) and the other consumers.
type Measurement struct {
	Pipe pipeline.Config
	Agg  aggregate.Config
	// Observers get every snapshot (see Every) on the aggregator's
	// goroutine; they must hand it off quickly.
	Observers []func(aggregate.Snapshot)
	Consumers []Consumer
	// Every is how often the aggregator publishes a snapshot to the
	// observers: 0 is aggregate.DefaultEvery (4 Hz), for a live view; a
	// status line printed once a second needs no more than StatusEvery, and
	// each snapshot merges every window's histograms, a good part of an
	// idle canary's CPU.
	Every time.Duration
}

// StatusEvery is the snapshot period enough for StatusLine on a terminal.
const StatusEvery = time.Second

// StatusLogEvery is the status line's period when stderr is not a terminal
// (a log file, a pipe, the journal): a canary left running all day would
// otherwise write 86,400 lines a day, and the snapshot behind each was a
// fifth of what a headless run at a few requests a minute cost.
const StatusLogEvery = 10 * time.Second

// statusEvery is the status line's period on w: StatusEvery on a terminal,
// StatusLogEvery elsewhere.
func statusEvery(w io.Writer) time.Duration {
	if IsTerminal(w) {
		return StatusEvery
	}
	return StatusLogEvery
}

// IsTerminal reports whether w is a terminal, looking through main's
// escaping writer to the file behind it.
func IsTerminal(w io.Writer) bool {
	if s, ok := w.(*textsafe.Shared); ok {
		w = s.Out()
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(f.Fd())
}

// DashboardEvery is the snapshot period of a local dashboard: once a
// second, as htop (1.5 s), nvitop and k9s (2 s) refresh, keeps its clock
// ticking each second while a screen left open all day draws a quarter of
// the frames 4 Hz would (each frame and each snapshot was most of what the
// dashboard cost). Keys still redraw at once.
const DashboardEvery = time.Second

// Run runs the pipeline to its end and returns the whole run's summary:
// every request the sources emitted is in it, Ctrl-C included (then
// interrupted is set: ctx ended the run before its sources ended, and the
// summary covers what was measured until then). Consumers are not stopped
// by ctx either: the fan-out closes their channels after the last event,
// so they take everything.
func (m Measurement) Run(ctx context.Context) (summary aggregate.Summary, interrupted bool, err error) {
	fan := pipeline.NewFanout()
	drainCtx := context.WithoutCancel(ctx)
	aggSub := fan.Subscribe("aggregator", 4096, pipeline.Lossless)
	waits := make([]func() error, 0, len(m.Consumers))
	for _, c := range m.Consumers {
		waits = append(waits, c.Start(drainCtx, fan))
	}
	agg := aggregate.New(m.Agg)
	publish := func(s aggregate.Snapshot) {
		for _, o := range m.Observers {
			o(s)
		}
	}
	summaryc := make(chan aggregate.Summary, 1)
	go func() { summaryc <- agg.Run(drainCtx, aggSub.Events(), m.Every, publish) }()

	res, err := pipeline.Run(ctx, m.Pipe, fan)
	summary = <-summaryc
	for _, wait := range waits {
		err = errors.Join(err, wait())
	}
	// The aggregator's Run has returned: this goroutine owns it now.
	var late []event.Event
	for _, c := range m.Consumers {
		if l, ok := c.(LateReporter); ok {
			late = append(late, l.LateEvents()...)
		}
	}
	if len(late) > 0 {
		for _, ev := range late {
			agg.Add(ev)
		}
		summary = agg.Summary()
	}
	return summary, res.Interrupted, err
}

// StatusLine prints a status line to w at most once every period.
func StatusLine(w io.Writer, every time.Duration) func(aggregate.Snapshot) {
	return throttledLine(w, every, aggregate.StatusLine)
}

// throttledLine prints text(s) of the snapshots it is given to w, at most
// once every period.
func throttledLine(w io.Writer, every time.Duration, text func(aggregate.Snapshot) string) func(aggregate.Snapshot) {
	var last time.Time
	return func(s aggregate.Snapshot) {
		if time.Since(last) < every {
			return
		}
		last = time.Now()
		fmt.Fprintln(w, text(s))
	}
}
