package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/latscope/latscope/bench"
)

// scaleLauncher is how `bench scale` starts its children; tests replace
// it to run the test binary as latscope.
type scaleLauncher func(cmd *cobra.Command) (bench.Launcher, error)

// selfLauncher runs this binary again, as `latscope bench …`, wherever
// the bench command sits in the tree.
func selfLauncher(cmd *cobra.Command) (bench.Launcher, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own binary for the children: %w", err)
	}
	path := strings.Fields(cmd.Parent().CommandPath()) // e.g. ["latscope", "bench"]
	return bench.ExecLauncher(exe, path[1:]...), nil
}

func newBenchScaleCmd() *cobra.Command { return newBenchScaleCmdWith(selfLauncher) }

func newBenchScaleCmdWith(launcher scaleLauncher) *cobra.Command {
	cfg := bench.ScaleConfig{
		Streams:      slices.Clone(bench.DefaultScaleStreams),
		Loads:        slices.Clone(bench.DefaultScaleLoads),
		Warmup:       5 * time.Second,
		Duration:     10 * time.Second,
		Rounds:       2,
		FirstToken:   50 * time.Millisecond,
		Interval:     100 * time.Millisecond,
		OutputTokens: 32,
	}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "Measure the probe's memory, CPU and timing error at thousands of concurrent streams against a bare client",
		Long: `scale runs the probe, as run builds it (headless), at each number of
concurrent streams against a server in a child process that streams on a fixed
schedule (the first token --first-token after a request arrives, then one every
--interval) and records when it flushed each token. Then it runs a bare client
(net/http and a line reader) the same way. Each client runs in a process of its
own, one after the other, each against a fresh server: --warmup unmeasured,
then --duration measured, then the requests in flight finish; --rounds times,
alternating which client goes first, so that a change in the host's load hits
both. Each count runs under each of --loads: closed, N streams each sending
when its last request ended; open, requests on a fixed schedule at N over one
request's length per second, so that N are in flight on average.

It prints, per stream count, load and client: requests, token events/s and CPU per
token event in the window, the process's peak resident set (VmHWM) and its
resident set at the end of the window, and the p50 and p99 |error| of TTFT and
ITL against the server's flush times, with the ratio probe/bare, and the
probe's verdict on itself (kept_pace, paused, held: its run summary's), with
the fewest streams at which it was the limit. Targets: at 10,000 closed-loop
streams, peak RSS <= 700 MB, events/s >= 0.8x the bare client's, CPU/event
<= 1.5x; at 1,000, probe/bare |error| <= 1.2x. It exits 1 on a missed target.

Each client process raises its open-file limit to the hard limit and stops,
saying so, when that is still too low for the streams asked for.`,
		Example: `  latscope bench scale
  latscope bench scale --streams 1000 --duration 20s --rounds 4
  latscope bench scale --streams 1000 --loads open
  latscope bench scale --cpu-profile-dir /tmp/prof   # then: go tool pprof -top latscope /tmp/prof/10000-closed-probe-0.cpu`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			launch, err := launcher(cmd)
			if err != nil {
				return fmt.Errorf("bench scale: %w", err)
			}
			cfg.StartServer = bench.ChildScaleServer(launch.With("serve", "--listen", "127.0.0.1:0"), cfg.FirstToken, cfg.Interval, cmd.ErrOrStderr())
			cfg.RunClient = bench.ChildScaleCase(launch.With("scale-case"), cmd.ErrOrStderr())
			res, err := bench.RunScale(cmd.Context(), cfg)
			if err != nil {
				return fmt.Errorf("bench scale: %w", err)
			}
			if asJSON {
				err = bench.WriteJSON(cmd.OutOrStdout(), res)
			} else {
				err = bench.WriteScaleTable(cmd.OutOrStdout(), res)
			}
			return bench.Missed(err, res.Met, "bench scale")
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&cfg.Streams, "streams", cfg.Streams, "concurrent streams, one count after the other")
	f.StringSliceVar(&cfg.Loads, "loads", cfg.Loads, "load models at each count: closed (streams sending back to back), open (a fixed rate keeping that many in flight)")
	f.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "unmeasured time before each phase's window, while the connections open")
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "measured time per client per count per round")
	f.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "phases per client per count, alternating who goes first (errors pooled)")
	f.DurationVar(&cfg.FirstToken, "first-token", cfg.FirstToken, "the server's first token this long after a request arrives")
	f.DurationVar(&cfg.Interval, "interval", cfg.Interval, "the server's time between tokens (streams/interval is the token rate)")
	f.IntVar(&cfg.OutputTokens, "output-tokens", cfg.OutputTokens, "tokens per request")
	f.BoolVar(&asJSON, "json", false, "print machine-readable JSON instead of a table")
	f.StringVar(&cfg.ProfileDir, "cpu-profile-dir", "", "write each client process's CPU profile to DIR/STREAMS-LOAD-CLIENT-ROUND.cpu (go tool pprof)")
	return cmd
}

// newBenchScaleCaseCmd is one phase of `bench scale`, in the child process
// it starts: one client at one stream count, its result a JSON line on
// stdout.
func newBenchScaleCaseCmd() *cobra.Command {
	var spec bench.ScaleSpec
	cmd := &cobra.Command{
		Use:    "scale-case",
		Short:  "Run one client of bench scale in this process (bench scale's child)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var drive bench.ScaleDriver
			switch spec.Client {
			case bench.ScaleProbe:
				drive = bench.DriveScaleProbe
			case bench.ScaleBare:
				drive = bench.DriveBare(bench.Model)
			default:
				return fmt.Errorf("--client %q: want %s or %s", spec.Client, bench.ScaleProbe, bench.ScaleBare)
			}
			if err := spec.Validate(); err != nil {
				return err
			}
			stop, err := bench.StartCPUProfile(spec.CPUProfile)
			if err != nil {
				return err
			}
			defer stop()
			run, err := bench.RunScaleCase(cmd.Context(), spec, drive)
			if err != nil {
				return fmt.Errorf("bench scale-case %s, %d streams: %w", spec.Client, spec.Streams, err)
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(run)
		},
	}
	f := cmd.Flags()
	f.StringVar(&spec.Client, "client", "", "probe or bare")
	f.StringVar(&spec.URL, "url", "", "the server's base URL")
	f.IntVar(&spec.Streams, "streams", 1, "concurrent streams")
	f.Float64Var(&spec.Rate, "rate", 0, "requests per second on a fixed schedule (open loop); 0: a closed loop of --streams")
	f.DurationVar(&spec.Warmup, "warmup", 0, "unmeasured time first")
	f.DurationVar(&spec.Duration, "duration", time.Second, "measured time")
	f.DurationVar(&spec.Drain, "drain", 10*time.Second, "time the requests in flight at the end may take to finish")
	f.IntVar(&spec.OutputTokens, "output-tokens", 32, "tokens per request")
	f.StringVar(&spec.LogPath, "log", "", "file for the frame log")
	f.StringVar(&spec.CPUProfile, "cpu-profile", "", "write this process's CPU profile to this file")
	return cmd
}
