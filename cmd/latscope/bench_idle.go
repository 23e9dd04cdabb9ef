package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/latscope/latscope/bench"
	"github.com/spf13/cobra"
)

// idleLaunchers builds the commands that start the idle bench's clients:
// latscope's probe (run's flags) and the plain client.
type idleLaunchers func(bench *cobra.Command) (probe, plain bench.Launcher, err error)

// ownLaunchers starts both clients as this binary.
func ownLaunchers(cmd *cobra.Command) (bench.Launcher, bench.Launcher, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("find own binary for the clients: %w", err)
	}
	path := strings.Fields(cmd.Parent().CommandPath()) // e.g. ["latscope", "bench"]
	return bench.ExecLauncher(exe), bench.ExecLauncher(exe, append(path[1:], "idle-client")...), nil
}

func newBenchIdleCmd() *cobra.Command { return newBenchIdleCmdWith(ownLaunchers) }

func newBenchIdleCmdWith(launchers idleLaunchers) *cobra.Command {
	cfg := bench.IdleConfig{
		Cases:        bench.IdleCases,
		Duration:     30 * time.Second,
		RateDuration: 10 * time.Minute,
		Warmup:       3 * time.Second,
		Rate:         0.2,
		OutputTokens: 128,
		FirstToken:   50 * time.Millisecond,
		Interval:     10 * time.Millisecond,
		Model:        bench.Model,
	}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "idle",
		Short: "Compare the CPU of latscope as a canary (one stream, a low rate) with a plain Go client's, at the same time",
		Long: `idle runs latscope (run -c 1, headless; with the dashboard on a terminal of its
own; and --rate 0.2) and a plain Go client (http.Post and a bufio.Scanner over
the body) at the same time, each in a process of its own against its own paced
server (50 ms to the first token, 10 ms between tokens), and reads each
process's CPU and memory from /proc over the same interval. Measured one after
the other, a client's CPU per token drifts several-fold between minutes on a
shared host; measured together, both drift alike. It prints CPU per token and
per second and the targets: c1, latscope's CPU per token at most 1.5× the plain
client's; dashboard, the dashboard adds at most 5 ms of CPU per second; rate,
at most 2 ms/s and 40 MB resident on average.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if cfg.Probe, cfg.Plain, err = launchers(cmd); err != nil {
				return fmt.Errorf("bench idle: %w", err)
			}
			cfg.Progress = cmd.ErrOrStderr()
			res, err := bench.RunIdle(cmd.Context(), cfg)
			if err != nil {
				return fmt.Errorf("bench idle: %w", err)
			}
			if asJSON {
				err = bench.WriteJSON(cmd.OutOrStdout(), res)
			} else {
				err = bench.WriteIdleTable(cmd.OutOrStdout(), res)
			}
			return bench.Missed(err, res.Met, "bench idle")
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&cfg.Cases, "cases", cfg.Cases, "cases to run: c1, dashboard, rate")
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "measured time of the c1 and dashboard cases")
	f.DurationVar(&cfg.RateDuration, "rate-duration", cfg.RateDuration, "measured time of the rate case")
	f.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "unmeasured time before each case's interval")
	f.Float64Var(&cfg.Rate, "rate", cfg.Rate, "requests per second of the rate case")
	f.IntVar(&cfg.OutputTokens, "output-tokens", cfg.OutputTokens, "tokens per request")
	f.DurationVar(&cfg.FirstToken, "first-token", cfg.FirstToken, "the servers' time to the first token")
	f.DurationVar(&cfg.Interval, "interval", cfg.Interval, "the servers' time between tokens")
	f.StringVar(&cfg.ProfileDir, "cpu-profile-dir", "", "write each latscope client's CPU profile to DIR/CASE-CLIENT.cpu (go tool pprof)")
	f.BoolVar(&asJSON, "json", false, "print machine-readable JSON instead of a table")
	return cmd
}

// newBenchIdleClientCmd is the idle bench's plain client child. It is
// hidden: the bench starts it.
func newBenchIdleClientCmd() *cobra.Command {
	var cfg bench.PlainClientConfig
	cmd := &cobra.Command{
		Use:    "idle-client",
		Short:  "Stream chat completions with a plain Go client (the idle bench's child)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, err := bench.RunPlainClient(cmd.Context(), cfg)
			fmt.Fprintf(cmd.OutOrStdout(), "%d data lines\n", n)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.URL, "url", "", "the server's base URL")
	f.StringVar(&cfg.Model, "model", bench.Model, "model name sent")
	f.IntVar(&cfg.OutputTokens, "output-tokens", 128, "tokens per request")
	f.Float64Var(&cfg.Rate, "rate", 0, "requests per second on a fixed schedule; 0: one stream after the other")
	f.DurationVar(&cfg.Duration, "duration", 30*time.Second, "how long to run")
	return cmd
}
