package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/aggregate/sweepjudge"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/recorder"
	"github.com/latscope/latscope/sweep"
)

// Recording is one recording, replayed through an aggregator: its summary,
// the run's TTFT breakdown bands and the time series the charts draw.
type Recording struct {
	// Path is the file it was read from, as the user named it.
	Path string
	// Summary is the whole run, as aggregate computes it, with every URL
	// passed through event.RedactURL again.
	Summary aggregate.Summary
	// Bands are the whole run's mean TTFT breakdown per band (every request,
	// around p50 and p90, the slowest 1%); each band's stages add up to its
	// TTFT.
	Bands [aggregate.NumBands]aggregate.Band
	// Series is the run over time.
	Series Series
	// Events counts the events read, the session header included.
	Events int64
	// Partial says the recording was cut short (its writer was killed, or
	// ran out of disk, mid-frame): the report covers only the events before
	// CutAt, the byte offset of the incomplete frame. Every format says so.
	Partial bool
	CutAt   int64
	// Warnings say what the report could not cover, e.g. a torn tail.
	Warnings []string
	// Sweep is the sweep a recording of `latscope sweep` ran, judged again
	// from its markers as the live sweep judged it; nil for other runs.
	Sweep *sweep.Result

	scan scan   // what a comparison needs to replay the file again
	file string // where the file is read again: Path, or a copy of a stream
}

// Simulated reports whether the session or its GPU was latscope's simulator.
func (r *Recording) Simulated() bool {
	s := r.Summary
	return s.Session != nil && s.Session.Simulated || s.GPU != nil && s.GPU.Simulated
}

// SimulatedNote says what in the recording was simulated, for a banner;
// empty when nothing was.
func (r *Recording) SimulatedNote() string {
	s := r.Summary
	session, gpu := s.Session != nil && s.Session.Simulated, s.GPU != nil && s.GPU.Simulated
	switch {
	case session && gpu:
		return "SIMULATED: " + r.Name() + " measured latscope's built-in simulator, with a simulated GPU, not a real model; its numbers describe the simulator."
	case session:
		return "SIMULATED: " + r.Name() + " measured latscope's built-in simulator, not a real model; its numbers describe the simulator."
	case gpu:
		return "SIMULATED GPU: the GPU figures of " + r.Name() + " come from latscope's simulated GPU, not a real device."
	}
	return ""
}

// Name is what the report calls the recording: its file's name, which
// tells two runs apart where the session's name (often the host) may not.
func (r *Recording) Name() string { return filepath.Base(r.Path) }

// Load reads the recording at path and replays it. A file cut short (a
// killed writer) is reported in Warnings and covers every complete frame; a
// file that is not a recording, is damaged, or was written by a version
// this build cannot read is an error.
func Load(path string) (*Recording, error) { return LoadAs(context.Background(), path, path) }

// LoadAs is Load of the file at path, named name in the report and its
// messages (a recording read from standard input is read from a copy). It
// stops reading when ctx ends: a large file takes a while.
func LoadAs(ctx context.Context, path, name string) (*Recording, error) {
	scan, err := scanRecording(ctx, path, name)
	if err != nil {
		return nil, err
	}
	rec := &Recording{Path: name, Events: scan.events, scan: scan, file: path}
	if scan.torn != nil {
		rec.Partial, rec.CutAt = true, scan.torn.Offset
		rec.Warnings = append(rec.Warnings, fmt.Sprintf(
			"partial recording: %s was cut short at byte offset %d (its last %s an incomplete frame, as when the writer is killed); this report covers the %s before that offset",
			name, scan.torn.Offset, counted(scan.torn.Size, "byte is", "bytes are"), counted(scan.events, "event", "events")))
	}

	if scan.duplicates > 0 {
		rec.Warnings = append(rec.Warnings, aggregate.DuplicatesNote(scan.duplicates))
	}

	if judged, ok, err := scan.sweep.Result(); err != nil {
		rec.Warnings = append(rec.Warnings, "the sweep's steps are not shown: "+err.Error())
	} else if ok {
		res := sweep.ResultOf(judged)
		rec.Sweep = &res
	} else if h := scan.header; h != nil && h.Load.Mode == "sweep" {
		rec.Warnings = append(rec.Warnings, "the sweep's answer and table of steps are not shown: this recording does not carry the rules its steps were judged by (a latscope before they were recorded); `latscope sweep` printed them when it ended")
	}

	agg := aggregate.New(aggregate.Config{})
	plan := newPlan(scan)
	ro := &reorderer{lateness: scan.lateness, release: func(at time.Time, ev event.Event) {
		// A point's snapshot holds every event up to it and none after it:
		// a later event would already claim a slot of the next window.
		plan.takeBefore(at, agg, rec)
		agg.Add(ev)
	}}
	if _, err := readEvents(ctx, path, name, ro.add); err != nil {
		return nil, err
	}
	ro.flush()
	plan.takeRest(agg, rec)

	final := agg.Final()
	rec.Summary = redactSummary(final.Summary())
	rec.Summary.DuplicatesIgnored = scan.duplicates
	rec.Bands = final.Windows[aggregate.WinRun].Bands
	rec.Series.Step, rec.Series.Window = plan.step, plan.window
	return rec, nil
}

// scan is what the first pass learns about a recording.
type scan struct {
	events     int64
	duplicates int64 // request events the reader dropped: read before
	torn       *recorder.TornTailError
	lateness   time.Duration // how far any event lags the latest time before it
	start      time.Time     // the session's start
	latest     time.Time     // the latest event time
	// firstDone and lastDone bound the completions of non-warm-up requests.
	firstDone, lastDone time.Time
	// sweep judges a sweep's steps again, from the events in file order.
	sweep  *sweepjudge.Recorded
	header *event.Session
}

func scanRecording(ctx context.Context, path, name string) (scan, error) {
	s := scan{sweep: &sweepjudge.Recorded{}}
	var clock orderClock
	end, err := readEvents(ctx, path, name, func(ev event.Event) {
		s.events++
		s.sweep.Add(ev)
		before := clock.latest
		at := clock.key(ev)
		s.lateness = max(s.lateness, before.Sub(at))
		if ev.Session != nil && s.start.IsZero() {
			s.start = ev.Session.Time
		}
		if ev.Session != nil && s.header == nil {
			s.header = ev.Session
		}
		if r := ev.Request; r != nil && !r.Warmup && !at.IsZero() && !r.HasFlag(event.FlagServerReported) {
			if s.firstDone.IsZero() || at.Before(s.firstDone) {
				s.firstDone = at
			}
			if at.After(s.lastDone) {
				s.lastDone = at
			}
		}
	})
	if err != nil {
		return scan{}, err
	}
	s.torn, s.duplicates, s.latest = end.torn, end.duplicates, clock.latest
	if s.start.IsZero() { // a header without a time, from another tool
		s.start = s.firstDone
	}
	return s, nil
}

// readEnd is how a recording's events ended: at a torn tail (nil when
// whole), having dropped duplicates request events read before.
type readEnd struct {
	torn       *recorder.TornTailError
	duplicates int64
}

// readEvents calls fn for every event of the recording at path (called
// name in errors), the header first, each request once (see
// recorder.Reader). A torn tail ends the events without an error and is
// returned.
func readEvents(ctx context.Context, path, name string, fn func(event.Event)) (readEnd, error) {
	r, err := recorder.Open(path)
	if err != nil {
		if path != name {
			return readEnd{}, fmt.Errorf("%s: %w", name, explain(err))
		}
		return readEnd{}, explain(err)
	}
	defer r.Close()
	for n := 0; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil { // a check per event would cost more than it saves
			return readEnd{}, fmt.Errorf("read %s: %w", name, ctx.Err())
		}
		ev, err := r.Next()
		var torn *recorder.TornTailError
		switch {
		case errors.Is(err, io.EOF):
			return readEnd{duplicates: r.Duplicates()}, nil
		case errors.As(err, &torn):
			return readEnd{torn: torn, duplicates: r.Duplicates()}, nil
		case err != nil:
			return readEnd{}, fmt.Errorf("read %s: %w", name, explain(err))
		}
		fn(ev)
	}
}

// explain adds what a user can do to the reader's errors.
func explain(err error) error {
	var torn *recorder.TornTailError
	switch {
	case errors.Is(err, recorder.ErrNotRecording):
		return fmt.Errorf("%w (latscope report reads the session files latscope records)", err)
	case errors.Is(err, recorder.ErrVersion):
		return fmt.Errorf("%w (use the latscope version that wrote it, or a newer one)", err)
	case errors.As(err, &torn):
		return fmt.Errorf("%w: the file ends before its session header is complete, so there is nothing to report", err)
	}
	return err
}
