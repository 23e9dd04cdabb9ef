package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/session"
	"github.com/latscope/latscope/sweep"
	"github.com/latscope/latscope/tui"
)

// sweepFlags are sweep's own settings; the target, prompts, scrape and
// recording come from the shared load flags.
type sweepFlags struct {
	rates, streams                string
	rateStart, rateFactor, rateMx float64
	refine                        int
	warmup, window, stepMax       time.Duration
	stopErrors                    string
}

func newSweepCmd() *cobra.Command {
	var (
		f      loadFlags
		sf     sweepFlags
		target string
	)
	cmd := &cobra.Command{
		Use:   "sweep --url URL",
		Short: "Find the load a server can take: step the load up until it saturates",
		Long: `sweep steps the load from low to past capacity: open-loop rates (the default:
--rate-start, doubling up to --rate-max, or --rates) or closed-loop
concurrencies (--streams). Each step runs until it is steady (TTFT, the
server's queue depth and the probe's requests in flight stop trending over
--steady-window) or for --step-max; its first --step-warmup and the requests
still in flight when it ends are kept out of its statistics. The sweep stops
climbing once the queue grows without bound (arrivals exceed completions),
throughput stops rising, or errors pass --stop-errors, then bisects between
the last load that passed and the first that failed (--refine).

It reports the highest load that meets the --slo objectives (with every lower
load meeting them too), the knee (the lowest load at which queue wait is the
largest stage of TTFT), and the saturation throughput, per step with TTFT,
ITL, TPOT and E2E percentiles, the queue's share of TTFT, goodput and errors.
Arrivals are constant by default, which measures the server's capacity;
--arrival poisson queues earlier, as real traffic does, and finds the load
that meets the objectives under bursts.

A step without a successful request (every request refused, 429, or the
server gone) ends the sweep, which then exits 1 naming the step and its most
common error (3 if no request of any step succeeded, as run exits). The load flags of run (-c, --steps, --rate, --duration, ...)
are refused: the steps set the load.`,
		Example: `  latscope sweep --url http://127.0.0.1:8000 --slo 'ttft.p99<300ms' --no-tui
  latscope sweep --url http://127.0.0.1:8000 --rates 2,4,8,12,16 --arrival poisson --json > sweep.json
  latscope sweep --url http://127.0.0.1:8000 --streams 1,2,4,8,16,32 --record sweep.lsr`,
		Args: cobra.NoArgs,
		// Refuse what the sweep would ignore before anything connects.
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := refuseUnusedFlags(cmd.Flags(), &sf); err != nil {
				return err
			}
			return sf.validate()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if target == "" {
				return errors.New("--url is required: the server to sweep, e.g. --url http://127.0.0.1:8000")
			}
			return runSweep(cmd, target, &f, &sf)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&target, "url", "", "the server's base URL, e.g. http://127.0.0.1:8000")
	fl.StringVar(&sf.rates, "rates", "", "open-loop rates to step through, req/s, e.g. 2,4,8,16 (instead of --rate-start/--rate-max)")
	fl.Float64Var(&sf.rateStart, "rate-start", 1, "first open-loop rate, req/s")
	fl.Float64Var(&sf.rateFactor, "rate-factor", 2, "each next rate is this times the last")
	fl.Float64Var(&sf.rateMx, "rate-max", 256, "highest open-loop rate, req/s")
	fl.StringVar(&sf.streams, "streams", "", "closed loop instead: concurrencies to step through, e.g. 1,2,4,8,16")
	fl.IntVar(&sf.refine, "refine", 3, "bisection steps between the last load that passed and the first that failed")
	fl.DurationVar(&sf.warmup, "step-warmup", 5*time.Second, "the first part of each step, kept out of its statistics")
	fl.DurationVar(&sf.window, "steady-window", 10*time.Second, "a step is steady once its TTFT and queues hold still this long")
	fl.DurationVar(&sf.stepMax, "step-max", 60*time.Second, "the longest a step runs when it does not settle")
	fl.StringVar(&sf.stopErrors, "stop-errors", "5%", "error rate that fails a step and stops the sweep")
	f.register(fl)
	f.registerHTTP2(fl)
	f.registerView(fl)
	// A sweep asks what load the server can take: constant arrivals put
	// the limit on the server, not on the bursts of the arrival process
	// (Poisson arrivals queue well below capacity, so the load they find
	// meeting a p99 objective says as much about the objective).
	f.arrival = probe.ArrivalConstant
	arrival := fl.Lookup("arrival")
	arrival.DefValue = probe.ArrivalConstant
	arrival.Usage = "open-loop arrivals: constant (the sweep's default: the server's capacity), poisson (as real traffic queues) or gamma"
	for _, r := range sweepRefused {
		_ = fl.MarkHidden(r.name) // registered by the shared load flags; it exists
	}
	return cmd
}

// sweepRefused are the shared load flags the sweep has no use for: each
// step sets its own load and length. Each names the sweep's flag to use
// instead (%s: the value given).
var sweepRefused = []struct{ name, instead string }{
	{"concurrency", "use --streams %s (closed-loop steps)"},
	{"steps", "use --streams %s (closed-loop steps, each run until steady)"},
	{"step-duration", "each step runs until it is steady, at most --step-max"},
	{"repeat-steps", "a sweep runs each step once"},
	{"rate", "use --rates %s (open-loop steps) or --rate-start/--rate-max"},
	{"trace", "a sweep sets its own load: --rates or --streams"},
	{"trace-speed", "a sweep sets its own load: --rates or --streams"},
	{"duration", "each step runs until it is steady, at most --step-max"},
	{"requests", "each step runs until it is steady, at most --step-max"},
	{"warmup", "use --step-warmup (the start of each step kept out of its statistics)"},
	{"drain", "the requests still in flight when a step ends are cut off and left out"},
	{"window", "the sweep's dashboard plots its steps; --steady-window is how long a step must hold still"},
}

// refuseUnusedFlags refuses a flag the sweep would ignore: a shared load
// flag, naming the sweep flag to use instead, or one of its own that the
// chosen steps leave unused.
func refuseUnusedFlags(fl *pflag.FlagSet, sf *sweepFlags) error {
	for _, r := range sweepRefused {
		f := fl.Lookup(r.name)
		if f == nil || !f.Changed {
			continue
		}
		instead := r.instead
		if strings.Contains(instead, "%s") {
			instead = fmt.Sprintf(instead, f.Value.String())
		}
		return fmt.Errorf("sweep does not take --%s; %s", r.name, instead)
	}
	given := "--rates"
	if sf.streams != "" {
		given = "--streams"
	}
	for _, name := range []string{"rate-start", "rate-factor", "rate-max"} {
		if fl.Changed(name) && (sf.rates != "" || sf.streams != "") {
			return fmt.Errorf("--%s applies to the default doubling rates; %s lists the steps itself", name, given)
		}
	}
	for _, name := range []string{"arrival", "burstiness"} {
		if fl.Changed(name) && sf.streams != "" {
			return fmt.Errorf("--%s applies to open-loop (rate) steps, not to --streams (closed loop)", name)
		}
	}
	return nil
}

// plan turns the flags into a sweep plan.
func (sf *sweepFlags) plan() (sweep.Plan, error) {
	switch {
	case sf.streams != "" && sf.rates != "":
		return sweep.Plan{}, errors.New("--streams (closed loop) and --rates (open loop): give one")
	case sf.streams != "":
		loads, err := sweep.ParseLoads(sf.streams)
		if err != nil {
			return sweep.Plan{}, fmt.Errorf("--streams: %w", err)
		}
		return sweep.Plan{Mode: sweep.ClosedLoop, Loads: loads, Refine: sf.refine}, nil
	case sf.rates != "":
		loads, err := sweep.ParseLoads(sf.rates)
		if err != nil {
			return sweep.Plan{}, fmt.Errorf("--rates: %w", err)
		}
		return sweep.Plan{Mode: sweep.OpenLoop, Loads: loads, Refine: sf.refine}, nil
	}
	return sweep.Plan{Mode: sweep.OpenLoop, Start: sf.rateStart, Factor: sf.rateFactor, Max: sf.rateMx, Refine: sf.refine}, nil
}

// validate checks the sweep's flags, naming the one to change, so a bad
// one is refused before the sweep connects.
func (sf *sweepFlags) validate() error {
	plan, err := sf.plan()
	if err != nil {
		return err
	}
	loads := plan
	loads.Refine = 0 // checked apart, so each error names its flag
	if err := loads.Validate(); err != nil {
		switch {
		case sf.streams != "":
			return fmt.Errorf("--streams: %w", err)
		case sf.rates != "":
			return fmt.Errorf("--rates: %w", err)
		}
		return fmt.Errorf("--rate-start/--rate-factor/--rate-max: %w", err)
	}
	if err := plan.Validate(); err != nil {
		return fmt.Errorf("--refine: %w", err)
	}
	// The sweep fills a zero with its default, so a flag's 0 would not
	// mean what it says.
	switch {
	case sf.warmup <= 0:
		return fmt.Errorf("--step-warmup %s: want more than 0", sf.warmup)
	case sf.window <= 0:
		return fmt.Errorf("--steady-window %s: want more than 0", sf.window)
	case sf.stepMax < sf.warmup+sf.window:
		return fmt.Errorf("--step-max %s: want at least --step-warmup + --steady-window (%s)", sf.stepMax, sf.warmup+sf.window)
	}
	stop, err := sweep.ParseFraction(sf.stopErrors)
	if err != nil {
		return fmt.Errorf("--stop-errors: %w", err)
	}
	if stop == 0 {
		return fmt.Errorf("--stop-errors %s: want a share above 0", sf.stopErrors)
	}
	return nil
}

func runSweep(cmd *cobra.Command, target string, f *loadFlags, sf *sweepFlags) error {
	ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
	plan, err := sf.plan() // checked with the other flags by validate, in PreRunE
	if err != nil {
		return err
	}
	stopErrors, err := sweep.ParseFraction(sf.stopErrors)
	if err != nil {
		return fmt.Errorf("--stop-errors: %w", err)
	}
	objectives, err := aggregate.ParseSLO(f.slo)
	if err != nil {
		return err
	}
	// The steps set the load; the session's own runner is never run.
	f.untilStopped = true
	dashboard := useDashboard(stdout, f.noTUI)
	s, err := openSession(ctx, stderr, target, f, nil)
	if errors.Is(err, session.ErrSetupInterrupted) {
		return &exitError{code: exitInterrupted, err: err}
	}
	if err != nil {
		return err
	}
	defer s.Close()
	s.Header.Load.Mode, s.Header.Load.Concurrency, s.Header.Load.Rate = "sweep", 0, 0
	if plan.Mode == sweep.OpenLoop {
		s.Header.Load.Arrival, s.Header.Load.Burstiness = f.arrival, f.burstiness
	}

	fan := pipeline.NewFanout()
	progress := pipeline.NewLatest[sweep.Progress]()
	var notices *tui.NoticeBoard
	out := stderr
	if dashboard {
		notices = &tui.NoticeBoard{After: stderr}
		out = notices
	}
	m := session.Measurement{} // only for its Consumers: the sweep runs the pipeline
	if err := addRecorderAndExport(ctx, out, f, s, &m); err != nil {
		return err
	}
	drainCtx := context.WithoutCancel(ctx)
	var waits []func() error
	for _, c := range m.Consumers {
		waits = append(waits, c.Start(drainCtx, fan))
	}
	var feed *tui.SweepFeed
	if dashboard {
		feed = tui.NewSweepFeed(progress, s.Header)
	}
	cfg := sweep.Config{
		Plan: plan, Aux: s.Aux, Stage: s.Attributor, Header: s.Header, Fanout: fan,
		SLO: objectives, Warmup: sf.warmup, Window: sf.window, StepMax: sf.stepMax, StopErrors: stopErrors,
		Step:     sweepStep(s, f),
		Progress: progress.Put,
	}
	if !dashboard {
		cfg.Progress = sweepProgressLines(stderr, progress.Put)
	}

	res, err := runSweepSteps(ctx, cfg, waits, feed, notices, tui.Options{Objectives: objectives, NoColor: f.noColor})
	if err != nil {
		return err
	}
	if f.jsonOut {
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
func runSweepSteps(ctx context.Context, cfg sweep.Config, waits []func() error, feed *tui.SweepFeed, notices *tui.NoticeBoard, opts tui.Options) (sweep.Result, error) {
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
		uiErr = showDashboard(ctx, feed, opts)
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
		return &exitError{code: exitInterrupted, err: errors.New("interrupted: the table covers the steps run until then")}
	case res.Failure != "" && res.NoneSucceeded():
		// Every request of every step failed: exit 3, as a run's.
		return &exitError{code: exitAllFailed, err: errors.New("sweep failed: " + res.Failure)}
	case res.Failure != "":
		// A step measured nothing of the server: the sweep did not find
		// its capacity, whatever it printed about the steps before.
		return &exitError{code: exitFailure, err: errors.New("sweep failed: " + res.Failure)}
	case len(objectives) > 0 && res.MaxLoad == nil:
		return &exitError{code: exitSLOMissed, err: errors.New("no load met the objectives")}
	}
	return nil
}

// sweepStep builds each step's runner: the step's rate or concurrency, and
// prompts of their own (another nonce on the same calibrated prompts), so a
// prefix cache cannot make later steps cheaper than earlier ones.
func sweepStep(s *session.Session, f *loadFlags) func(sweep.StepSpec) (pipeline.Source, error) {
	return func(spec sweep.StepSpec) (pipeline.Source, error) {
		prompts := s.Prompts.WithNonce(uint64(spec.Index) + 1)
		r, err := probe.NewRunner(s.Client, probe.LoadConfig{
			Rate: spec.Load.Rate(), Concurrency: spec.Load.Concurrency(),
			Arrival: f.arrival, Burstiness: f.burstiness, Seed: f.seed.value() + int64(spec.Index),
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
