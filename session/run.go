package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/recorder"
	"github.com/latscope/latscope/tui"
)

// Outputs are the consumers a run adds beside the aggregator: the
// recording and the OTLP trace export.
type Outputs struct {
	Record          string // a recording's path; "" records nothing
	RecordOverwrite bool
	OTLPExport      string // an OTLP/HTTP endpoint each request goes to as a trace; "" exports nothing
	FlushTimeout    time.Duration
}

// Check checks what can be checked before the server is contacted (a
// recording's path), so that a typo costs nothing.
func (o Outputs) Check() error {
	if o.Record == "" {
		return nil
	}
	if err := recorder.CheckPath(o.Record, recorder.Options{Overwrite: o.RecordOverwrite}); err != nil {
		return fmt.Errorf("--record: %w", err)
	}
	return nil
}

// Wire adds the recording and the export to m, saying each on stderr; the
// loss of either is announced in the stream (their aux sources).
func (o Outputs) Wire(ctx context.Context, stderr io.Writer, s *Session, m *Measurement) error {
	if o.Record != "" {
		rec, err := NewRecording(o.Record, s.Header, o.RecordOverwrite)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "latscope: recording to %s\n", o.Record)
		m.Consumers = append(m.Consumers, rec)
		m.Observers = append(m.Observers, rec.WarnWhenBehind(stderr), rec.WarnWhenFailing(stderr, time.Now))
		// Clipped: the session's own list of aux sources stays as it is.
		m.Pipe.Aux = append(slices.Clip(m.Pipe.Aux), rec.Losses(time.Now))
	}
	if o.OTLPExport != "" {
		exp, err := NewTraceExport(ctx, stderr, o.OTLPExport, o.FlushTimeout)
		if err != nil {
			return fmt.Errorf("--otlp-export: %w", err)
		}
		fmt.Fprintf(stderr, "latscope: exporting each request as a trace to %s\n", event.RedactURL(o.OTLPExport))
		m.Consumers = append(m.Consumers, exp)
		m.Pipe.Aux = append(slices.Clip(m.Pipe.Aux), exp.Losses(time.Now))
	}
	return nil
}

// RunConfig is one measuring run: the session to open, what it writes
// beside the summary, how the summary is judged and where it is shown.
type RunConfig struct {
	Session Options
	Outputs Outputs
	// SLO and TTFTBasis are as the command line gives them
	// (aggregate.ParseSLO, aggregate.ParseTTFTBasis).
	SLO, TTFTBasis string
	// JSON prints the summary as JSON instead of a table.
	JSON bool
	// Screen, when set, shows the live dashboard (with View's options)
	// until the user quits; nil runs headless with a status line on stderr.
	Screen Screen
	View   tui.Options
}

// Run opens the session, measures it to its end, prints the summary on
// stdout and returns why the run ended other than well (an ExitError), if
// it did: the whole of `latscope run` and `demo` after their flags.
func Run(ctx context.Context, stdout, stderr io.Writer, c RunConfig) error {
	basis, err := aggregate.ParseTTFTBasis(c.TTFTBasis)
	if err != nil {
		return fmt.Errorf("--ttft-basis: %w", err)
	}
	objectives, err := aggregate.ParseSLO(c.SLO)
	if err != nil {
		return err
	}
	if err := c.Outputs.Check(); err != nil {
		return err
	}
	s, err := Open(ctx, stderr, c.Session)
	if errors.Is(err, ErrSetupInterrupted) {
		return Exit(Interrupted, err)
	}
	if err != nil {
		return err
	}
	defer s.Close()
	m := Measurement{
		Pipe: s.PipelineConfig(),
		Agg:  aggregate.Config{Now: time.Now, OfferedRate: s.Offered, SLO: objectives, TTFTBasis: basis},
	}
	notices, err := c.prepare(ctx, stderr, s, &m)
	if err != nil {
		return err
	}
	var summary aggregate.Summary
	var interrupted bool
	var runErr error
	if c.Screen != nil {
		view := c.View
		view.Objectives = objectives
		summary, interrupted, runErr = RunWithDashboard(ctx, m, c.Screen, notices, view)
	} else {
		summary, interrupted, runErr = m.Run(ctx)
	}
	if c.JSON {
		err = aggregate.WriteJSON(stdout, summary)
	} else {
		err = aggregate.WriteTable(stdout, summary)
	}
	if err != nil {
		return fmt.Errorf("write the summary: %w", err)
	}
	return Outcome(stderr, summary, objectives, interrupted, runErr)
}

// prepare adds the status line (headless) and the outputs to m. While the
// dashboard runs nothing may print on stderr: notices go to its header
// instead, through the board returned.
func (c RunConfig) prepare(ctx context.Context, stderr io.Writer, s *Session, m *Measurement) (*tui.NoticeBoard, error) {
	var notices *tui.NoticeBoard
	progress := stderr
	if c.Screen != nil {
		notices = &tui.NoticeBoard{After: stderr}
		progress = notices
		m.Every = DashboardEvery
	} else {
		every := statusEvery(stderr)
		m.Observers = append(m.Observers, StatusLine(stderr, every))
		if c.Outputs.Record == "" { // a recording's failure is said at the next snapshot: keep them 4 a second
			m.Every = every
		}
	}
	return notices, c.Outputs.Wire(ctx, progress, s, m)
}
