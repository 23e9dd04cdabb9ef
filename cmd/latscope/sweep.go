package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/session"
	"github.com/latscope/latscope/sweep"
	"github.com/latscope/latscope/tui"
)

func newSweepCmd() *cobra.Command {
	var (
		f      loadFlags
		sf     sweep.Spec
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
			return sf.Validate()
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
	fl.StringVar(&sf.Rates, "rates", "", "open-loop rates to step through, req/s, e.g. 2,4,8,16 (instead of --rate-start/--rate-max)")
	fl.Float64Var(&sf.RateStart, "rate-start", 1, "first open-loop rate, req/s")
	fl.Float64Var(&sf.RateFactor, "rate-factor", 2, "each next rate is this times the last")
	fl.Float64Var(&sf.RateMax, "rate-max", 256, "highest open-loop rate, req/s")
	fl.StringVar(&sf.Streams, "streams", "", "closed loop instead: concurrencies to step through, e.g. 1,2,4,8,16")
	fl.IntVar(&sf.Refine, "refine", 3, "bisection steps between the last load that passed and the first that failed")
	fl.DurationVar(&sf.Warmup, "step-warmup", 5*time.Second, "the first part of each step, kept out of its statistics")
	fl.DurationVar(&sf.Window, "steady-window", 10*time.Second, "a step is steady once its TTFT and queues hold still this long")
	fl.DurationVar(&sf.StepMax, "step-max", 60*time.Second, "the longest a step runs when it does not settle")
	fl.StringVar(&sf.StopErrors, "stop-errors", "5%", "error rate that fails a step and stops the sweep")
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
func refuseUnusedFlags(fl *pflag.FlagSet, sf *sweep.Spec) error {
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
	if sf.Streams != "" {
		given = "--streams"
	}
	for _, name := range []string{"rate-start", "rate-factor", "rate-max"} {
		if fl.Changed(name) && (sf.Rates != "" || sf.Streams != "") {
			return fmt.Errorf("--%s applies to the default doubling rates; %s lists the steps itself", name, given)
		}
	}
	for _, name := range []string{"arrival", "burstiness"} {
		if fl.Changed(name) && sf.Streams != "" {
			return fmt.Errorf("--%s applies to open-loop (rate) steps, not to --streams (closed loop)", name)
		}
	}
	return nil
}

func runSweep(cmd *cobra.Command, target string, f *loadFlags, sf *sweep.Spec) error {
	// The steps set the load; the session's own runner is never run.
	f.untilStopped = true
	o, err := f.sessionOptions(cmd.ErrOrStderr(), target)
	if err != nil {
		return err
	}
	c := session.SweepConfig{
		Session: o, Outputs: f.outputs(), Spec: *sf, SLO: f.slo,
		Arrival: f.arrival, Burstiness: f.burstiness, Seed: f.seed.Value(),
		JSON: f.jsonOut, View: tui.Options{NoColor: f.noColor},
	}
	if useDashboard(cmd.OutOrStdout(), f.noTUI) {
		c.Screen = showDashboard
	}
	return session.Sweep(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), c)
}
