package session

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/aggregate/sweepjudge"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/sweep"
	"github.com/latscope/latscope/tui"
)

// SweepConfig is one sweep: the session to open (its load is the steps'),
// what it writes beside its table, the steps and how each is judged.
type SweepConfig struct {
	Session Options
	Outputs Outputs
	// Spec is the steps and how each is judged (checked: sweep.Spec.Validate).
	Spec sweep.Spec
	// SLO is as the command line gives it (aggregate.ParseSLO).
	SLO string
	// Arrival and Burstiness shape the open-loop steps' arrivals; step i
	// draws from Seed+i.
	Arrival    string
	Burstiness float64
	Seed       int64

	// JSON prints the result as JSON instead of a table.
	JSON bool
	// Screen, when set, shows the sweep's dashboard (quitting it stops the
	// sweep); nil prints a line per step on stderr.
	Screen Screen
	View   tui.Options
}

// Sweep opens the session, runs the sweep's steps, prints its result on
// stdout and returns why it ended other than well (an ExitError), if it
// did: the whole of `latscope sweep` after its flags.
func Sweep(ctx context.Context, stdout, stderr io.Writer, c SweepConfig) error {
	plan, err := c.Spec.Plan()
	if err != nil {
		return err
	}
	stopErrors, err := sweep.ParseFraction(c.Spec.StopErrors)
	if err != nil {
		return fmt.Errorf("--stop-errors: %w", err)
	}
	objectives, err := aggregate.ParseSLO(c.SLO)
	if err != nil {
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
	s.Header.Load.Mode, s.Header.Load.Concurrency, s.Header.Load.Rate = "sweep", 0, 0
	if plan.Mode == sweep.OpenLoop {
		s.Header.Load.Arrival, s.Header.Load.Burstiness = c.Arrival, c.Burstiness
	}

	fan := pipeline.NewFanout()
	progress := pipeline.NewLatest[sweep.Progress]()
	dashboard := c.Screen != nil
	var notices *tui.NoticeBoard
	out := stderr
	if dashboard {
		notices = &tui.NoticeBoard{After: stderr}
		out = notices
	}
	m := Measurement{} // only for its Consumers: the sweep runs the pipeline
	if err := c.Outputs.Wire(ctx, out, s, &m); err != nil {
		return err
	}
	drainCtx := context.WithoutCancel(ctx)
	var waits []func() error
	for _, cons := range m.Consumers {
		waits = append(waits, cons.Start(drainCtx, fan))
	}
	var feed *tui.SweepFeed
	if dashboard {
		feed = tui.NewSweepFeed(progress, s.Header)
	}
	cfg := sweep.Config{
		Plan: plan, Aux: s.Aux, Stage: s.Attributor, Header: s.Header, Fanout: fan,
		Rules:    sweepjudge.Rules{SLO: objectives, Warmup: c.Spec.Warmup, Window: c.Spec.Window, StepMax: c.Spec.StepMax, StopErrors: stopErrors},
		Step:     sweepStep(s, c),
		Progress: progress.Put,
	}
	if !dashboard {
		cfg.Progress = sweepProgressLines(stderr, progress.Put)
	}
	view := c.View
	view.Objectives = objectives
	res, err := runSweepSteps(ctx, cfg, waits, c.Screen, feed, notices, view)
	if err != nil {
		return err
	}
	if c.JSON {
		err = sweep.WriteJSON(stdout, res)
	} else {
		err = sweep.WriteTable(stdout, res)
	}
	if err != nil {
		return fmt.Errorf("write the sweep: %w", err)
	}
	return sweepOutcome(res, objectives, dashboard)
}

// runSweepSteps runs the sweep, on the dashboard when feed is set (quitting
// it stops the sweep), and waits for the consumers to take the last event.
func runSweepSteps(ctx context.Context, cfg sweep.Config, waits []func() error, screen Screen, feed *tui.SweepFeed, notices *tui.NoticeBoard, opts tui.Options) (sweep.Result, error) {
	sweepCtx, stopSweep := context.WithCancel(ctx)
	defer stopSweep()
	type result struct {
		res sweep.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := sweep.Run(sweepCtx, cfg)
		done <- result{res, err}
	}()
	var uiErr error
	if feed != nil {
		uiErr = screen(ctx, feed, opts)
		notices.Detach()
		stopSweep()
	}
	r := <-done
	for _, wait := range waits {
		r.err = errors.Join(r.err, wait())
	}
	return r.res, errors.Join(r.err, uiErr)
}

// sweepOutcome maps a finished sweep to its exit, as outcome does a run's.
func sweepOutcome(res sweep.Result, objectives []aggregate.Objective, dashboard bool) error {
	switch {
	case res.Interrupted && !dashboard:
		return Exit(Interrupted, errors.New("interrupted: the table covers the steps run until then"))
	case res.Failure != "" && res.NoneSucceeded():
		// Every request of every step failed: exit 3, as a run's.
		return Exit(AllFailed, errors.New("sweep failed: "+res.Failure))
	case res.Failure != "":
		// A step measured nothing of the server: the sweep did not find
		// its capacity, whatever it printed about the steps before.
		return Exit(Failed, errors.New("sweep failed: "+res.Failure))
	case len(objectives) > 0 && res.MaxLoad == nil:
		return Exit(SLOMissed, errors.New("no load met the objectives"))
	}
	return nil
}

// sweepStep builds each step's runner: the step's rate or concurrency, and
// prompts of their own (another nonce on the same calibrated prompts), so a
// prefix cache cannot make later steps cheaper than earlier ones.
func sweepStep(s *Session, c SweepConfig) func(sweep.StepSpec) (pipeline.Source, error) {
	return func(spec sweep.StepSpec) (pipeline.Source, error) {
		prompts := s.Prompts.WithNonce(uint64(spec.Index) + 1)
		r, err := probe.NewRunner(s.Client, probe.LoadConfig{
			Rate: spec.Load.Rate(), Concurrency: spec.Load.Concurrency(),
			Arrival: c.Arrival, Burstiness: c.Burstiness, Seed: c.Seed + int64(spec.Index),
		}, prompts)
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", spec.Index, err)
		}
		s.SetRunner(r)
		return r, nil
	}
}

// sweepProgressLines prints a line per finished step on w, headless.
func sweepProgressLines(w io.Writer, next func(sweep.Progress)) func(sweep.Progress) {
	printed := 0
	return func(p sweep.Progress) {
		for ; printed < len(p.Result.Steps); printed++ {
			st := p.Result.Steps[printed]
			fmt.Fprintf(w, "latscope sweep: step %d  %s  %s\n", st.Index, st.Load, stepLine(&st))
		}
		next(p)
	}
}

// stepLine is one step in a few words.
func stepLine(st *sweep.Step) string {
	ttft := "-" // no successful request: nothing measured
	if st.TTFT.Count > 0 {
		ttft = fmt.Sprintf("%.1f ms", st.TTFT.P99)
	}
	line := fmt.Sprintf("%.2f ok/s  TTFT p99 %s  %s", st.Throughput, ttft, st.Verdict())
	if st.Failed != "" {
		line += ": " + st.Failed
	}
	return line
}
