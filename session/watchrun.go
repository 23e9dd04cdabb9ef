package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/tui"
)

// WatchConfig is one watch of a server's own traffic.
type WatchConfig struct {
	Session Options
	Outputs Outputs
	// CanaryRate, when above 0, sends the session's load (a steady canary
	// at this many requests/s) beside the server's traffic; without it no
	// load is sent, for Duration (0: until stopped).
	CanaryRate float64
	Duration   time.Duration
	JSON       bool
	// Screen, when set, shows the watch view; nil runs headless with a
	// status line a second on stderr.
	Screen Screen
	View   tui.Options
	// SSH serves the watch view over SSH as well.
	SSH SSH
}

// Watch opens the watch session, runs it to its end and prints its
// summary on stdout: the whole of `latscope watch` after its flags.
func Watch(ctx context.Context, stdout, stderr io.Writer, c WatchConfig) error {
	if err := CheckCanaryRate(c.CanaryRate); err != nil {
		return err
	}
	// The dashboard over ssh first: a refused address or a missing key
	// fails before anything is asked of the server.
	dash, err := c.SSH.start(ctx, stderr, nil, "latscope watch", nil, c.View.NoColor)
	if err != nil {
		return err
	}
	defer dash.stop()
	s, err := c.open(ctx, stderr)
	if errors.Is(err, ErrSetupInterrupted) {
		return Exit(Interrupted, err)
	}
	if err != nil {
		return err
	}
	defer s.Close()
	m := Measurement{Pipe: s.PipelineConfig(), Agg: aggregate.Config{Now: time.Now, OfferedRate: s.Offered},
		Observers: []func(aggregate.Snapshot){dash.observe}}
	dashboard := c.Screen != nil
	var notices *tui.NoticeBoard
	progress := stderr
	if dashboard {
		notices = &tui.NoticeBoard{After: stderr}
		progress = notices
	} else {
		m.Observers = append(m.Observers, watchStatusLine(stderr, statusEvery(stderr)))
	}
	if err := c.Outputs.Wire(ctx, progress, s, &m); err != nil {
		return err
	}
	var summary aggregate.Summary
	var interrupted bool
	if dashboard {
		summary, interrupted, err = RunWithDashboard(ctx, m, c.Screen, notices, c.View)
	} else {
		summary, interrupted, err = m.Run(ctx)
	}
	if c.JSON {
		err = errors.Join(err, aggregate.WriteJSON(stdout, summary))
	} else {
		err = errors.Join(err, aggregate.WriteWatchTable(stdout, summary))
	}
	if err != nil {
		return err
	}
	if interrupted {
		return Exit(Interrupted, errors.New("interrupted: the summary covers the time watched until then"))
	}
	return nil
}

// open opens the watch session: the collectors alone, or with the
// canary's load as well.
func (c WatchConfig) open(ctx context.Context, stderr io.Writer) (*Session, error) {
	if c.CanaryRate <= 0 {
		return OpenWatch(ctx, stderr, c.Session, c.Duration)
	}
	return OpenCanary(ctx, stderr, c.Session)
}

// watchStatusLine prints the watch status line to w at most once every
// period.
func watchStatusLine(w io.Writer, every time.Duration) func(aggregate.Snapshot) {
	return throttledLine(w, every, aggregate.WatchStatusLine)
}

// CheckCanaryRate checks --canary-rate: 0 (none) to 1000 requests/s.
func CheckCanaryRate(r float64) error {
	if math.IsNaN(r) || r < 0 || r > 1000 {
		return fmt.Errorf("--canary-rate %g: want 0 (no canary) to 1000 requests per second", r)
	}
	return nil
}
