package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/latscope/latscope/bench"
	"github.com/latscope/latscope/session"
)

// newBenchCmd builds `latscope bench`: measurements of latscope's own probe
// against a bare client, run side by side. Each prints its report, marking a
// missed target MISSED, and then exits 1 (errTargetMissed) so a script or
// CI job sees it.
func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the probe's own accuracy and speed against a bare client",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newBenchAccuracyCmd(), newBenchThroughputCmd(), newBenchServeCmd(), newBenchSoakCmd(), newBenchSoakCaseCmd(),
		newBenchScaleCmd(), newBenchScaleCaseCmd(), newBenchIdleCmd(), newBenchIdleClientCmd())
	return cmd
}

func newBenchAccuracyCmd() *cobra.Command {
	cfg := bench.AccuracyConfig{
		Profile:      "h100-7b",
		Concurrency:  []int{1, 64},
		PromptTokens: 128,
		OutputTokens: 64,
		Timeout:      2 * time.Minute,
	}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "accuracy",
		Short: "Compare the probe's TTFT and ITL timing error with a bare client's, against the simulator's own clock",
		Long: `accuracy runs the simulator in this process and streams requests to it with
the probe and with a bare client (net/http and a line reader, nothing else),
interleaved request by request. Every content frame the simulator flushes is
timestamped there; each client's arrival times are compared with those, and the
mean and p99 |error| of TTFT and ITL are printed with the ratio probe/bare.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Clients = bench.DefaultClients(bench.Model)
			cfg.StartServer = bench.SimServer(cfg.Profile, bench.Model, slices.Max(append([]int{1}, cfg.Concurrency...)))
			res, err := bench.RunAccuracy(cmd.Context(), cfg)
			if err != nil {
				return fmt.Errorf("bench accuracy: %w", err)
			}
			if asJSON {
				err = bench.WriteJSON(cmd.OutOrStdout(), res)
			} else {
				err = bench.WriteAccuracyTable(cmd.OutOrStdout(), res)
			}
			return bench.Missed(err, res.Target.Met, "bench accuracy")
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Profile, "profile", cfg.Profile, "simulator profile (h100-7b; tiny runs faster)")
	f.IntSliceVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "concurrency levels to run, in order")
	f.IntVar(&cfg.Requests, "requests", 0, "requests per client per level (0: max(8, 2×concurrency))")
	f.IntVar(&cfg.OutputTokens, "output-tokens", cfg.OutputTokens, "output tokens per request")
	f.IntVar(&cfg.PromptTokens, "prompt-tokens", cfg.PromptTokens, "prompt tokens per request")
	f.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "limit on one request")
	f.BoolVar(&asJSON, "json", false, "print machine-readable JSON instead of a table")
	return cmd
}

func newBenchThroughputCmd() *cobra.Command {
	cfg := bench.ThroughputConfig{
		Concurrency:    []int{1, 64, 256},
		TokensPerWrite: []int{1, 16},
		OutputTokens:   1024,
		Duration:       500 * time.Millisecond,
		Rounds:         4, // short alternating phases average out a busy machine's noise
		Warmup:         200 * time.Millisecond,
	}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "throughput",
		Short: "Compare the probe's token rate, CPU and allocations per token with a bare client's",
		Long: `throughput starts a streaming server that writes OpenAI chat chunks as fast as
the socket takes them, in a child process (so that this process's CPU time and
allocations are the clients' alone), and reads from it with the probe and with
a bare client at each concurrency level, alternating. It prints token events
per second, CPU µs per token and bytes allocated per token, and the ratios
probe/bare beside their targets.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("bench throughput: find own binary for the server child: %w", err)
			}
			cfg.Clients = bench.DefaultClients(bench.Model)
			cfg.StartServer = bench.ChildServer(bench.ExecLauncher(exe, serveArgs(cmd)...), cmd.ErrOrStderr())
			res, err := bench.RunThroughput(cmd.Context(), cfg)
			if err != nil {
				return fmt.Errorf("bench throughput: %w", err)
			}
			if asJSON {
				err = bench.WriteJSON(cmd.OutOrStdout(), res)
			} else {
				err = bench.WriteThroughputTable(cmd.OutOrStdout(), res)
			}
			return bench.Missed(err, res.Met, "bench throughput")
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "concurrent streams, one level after the other")
	f.IntSliceVar(&cfg.TokensPerWrite, "tokens-per-write", cfg.TokensPerWrite, "token events per server write (one server per value)")
	f.IntVar(&cfg.OutputTokens, "output-tokens", cfg.OutputTokens, "tokens per streamed response")
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "length of one measured phase")
	f.Int64Var(&cfg.Tokens, "tokens", 0, "end each phase after this many token events instead of --duration (0: use --duration)")
	f.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "measured phases per client per case (client order alternates)")
	f.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "unmeasured phase per client before each case")
	f.BoolVar(&asJSON, "json", false, "print machine-readable JSON instead of a table")
	return cmd
}

// serveArgs returns the arguments that run `bench serve` in a copy of this
// binary, wherever the bench command sits in the tree.
func serveArgs(throughput *cobra.Command) []string {
	path := strings.Fields(throughput.Parent().CommandPath()) // e.g. ["latscope", "bench"]
	return append(path[1:], "serve", "--listen", "127.0.0.1:0")
}

// newBenchServeCmd is the server child of the throughput and scale
// benches. It is hidden: a bench starts it, and it exits when its stdin
// closes.
func newBenchServeCmd() *cobra.Command {
	var (
		listen    string
		fs        bench.FastServer
		truthPath string
	)
	cmd := &cobra.Command{
		Use:    "serve",
		Short:  "Serve chat completion streams, at full speed or on a fixed schedule (the benches' child)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Each stream holds a socket; the scale bench's hold thousands.
			if _, err := bench.RaiseFileLimit(); err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "latscope bench serve:", err)
			}
			return bench.ServeChildTruth(cmd.Context(), listen, fs, truthPath, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:0", "address to listen on; the base URL is printed on stdout")
	f.IntVar(&fs.TokensPerWrite, "tokens-per-write", 1, "token events per write")
	f.DurationVar(&fs.FirstToken, "first-token", 0, "with --interval: the first content write this long after a request arrives")
	f.DurationVar(&fs.Interval, "interval", 0, "pace the content writes this far apart (0: as fast as the socket takes them)")
	f.StringVar(&truthPath, "truth", "", "write each stream's arrival and flush times to this file (the scale bench's ground truth)")
	return cmd
}

func newBenchSoakCmd() *cobra.Command {
	cfg := bench.SoakConfig{
		Cases:       bench.SoakCases,
		Checkpoints: []time.Duration{3 * time.Minute, 5 * time.Minute, 10 * time.Minute},
		Parallel:    1,
	}
	var (
		asJSON     bool
		profileDir string
	)
	cmd := &cobra.Command{
		Use:   "soak",
		Short: "Check that the probe's memory stays flat over a long run at full speed",
		Long: `soak runs the real pipeline, as run builds it, against a fast server on
loopback (TTFT 0, ITL 0, 8,192-token outputs, -c 4) for each case, in a
process of its own (this binary again), and measures that process at each
checkpoint: its resident set (VmRSS) and its heap after a GC (the lowest
of 8 readings over about a second, since a request in flight holds its
token times until it ends). The cases:

  headless   run --no-tui
  dashboard  the dashboard's model rendered off screen at 200x50, 4 frames/s
  record     run --no-tui --record to a temporary file
  agent      an agent (replay ring at its default, 32 MiB) with two attached clients
  endless    -c 2 against a server that streams without end, cut at 65,536 tokens

It prints heap and RSS at each checkpoint (the first after the stall
detector's 2-minute window has filled), the heap at the last over the first,
PASS or MISSED against the targets (heap last/first <= 1.1, RSS <= 150 MB),
and exits 1 when one is missed.`,
		Example: `  latscope bench soak
  latscope bench soak --checkpoints 10s,30s,60s --cases headless,endless`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("bench soak: find own binary for the cases: %w", err)
			}
			path := strings.Fields(cmd.Parent().CommandPath()) // e.g. ["latscope", "bench"]
			args := append(path[1:], "soak-case")
			if profileDir != "" {
				args = append(args, "--heap-profile-dir", profileDir)
			}
			cfg.RunCase = bench.ChildSoakCase(exe, args, cmd.ErrOrStderr())
			res, err := bench.RunSoak(cmd.Context(), cfg)
			if err != nil {
				return fmt.Errorf("bench soak: %w", err)
			}
			if asJSON {
				err = bench.WriteJSON(cmd.OutOrStdout(), res)
			} else {
				err = bench.WriteSoakTable(cmd.OutOrStdout(), res)
			}
			if err != nil {
				return err
			}
			if !res.Met {
				return session.Exit(session.Failed, errors.New("bench soak: a target was missed"))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&cfg.Cases, "cases", cfg.Cases, "cases to run: "+strings.Join(bench.SoakCases, ", "))
	f.DurationSliceVar(&cfg.Checkpoints, "checkpoints", cfg.Checkpoints, "when to measure, from each case's start")
	f.IntVar(&cfg.Parallel, "parallel", cfg.Parallel, "cases run at once (each its own process; they share the CPUs)")
	f.BoolVar(&asJSON, "json", false, "print machine-readable JSON instead of a table")
	f.StringVar(&profileDir, "heap-profile-dir", "", "write each case's heap profile at its last checkpoint to DIR/CASE.heap and at each checkpoint to DIR/CASE@CP.heap (for go tool pprof -diff_base)")
	return cmd
}

// newBenchSoakCaseCmd is one soak case, in the child process `bench soak`
// starts: it prints a JSON line per checkpoint on stdout.
func newBenchSoakCaseCmd() *cobra.Command {
	var (
		name        string
		checkpoints []time.Duration
		profileDir  string
	)
	cmd := &cobra.Command{
		Use:    "soak-case",
		Short:  "Run one soak case in this process (bench soak's child)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !slices.Contains(bench.SoakCases, name) {
				return fmt.Errorf("--case %q: want one of %s", name, strings.Join(bench.SoakCases, ", "))
			}
			if len(checkpoints) == 0 {
				return errors.New("--checkpoints: need at least one")
			}
			profile := ""
			if profileDir != "" {
				profile = filepath.Join(profileDir, name+".heap")
			}
			return bench.RunSoakCase(cmd.Context(), cmd.OutOrStdout(), name, checkpoints, bench.SoakHeapReadings, profile)
		},
	}
	cmd.Flags().StringVar(&name, "case", "", "the case to run")
	cmd.Flags().DurationSliceVar(&checkpoints, "checkpoints", nil, "when to measure, from the case's start")
	cmd.Flags().StringVar(&profileDir, "heap-profile-dir", "", "write the heap profile at the last checkpoint to DIR/CASE.heap")
	return cmd
}
