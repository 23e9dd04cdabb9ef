package main

import (
	"github.com/latscope/latscope/aggregate"
	"time"

	"github.com/spf13/cobra"

	"github.com/latscope/latscope/attribute"
	"github.com/latscope/latscope/session"
)

func newDemoCmd() *cobra.Command {
	var (
		f      loadFlags
		srv    session.DemoServer // the simulator's settings
		repeat repeatFlags
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Everything on a built-in SIMULATED server: no model, no GPU needed",
		Long: `demo starts latscope's simulated LLM server in-process (continuous batching,
a queue, tokenization, prefill and decode costs calibrated to a 7B model on one
H100), sends it server spans over OTLP, drives a simulated GPU from its batch,
and measures it exactly as 'run' measures a real server. Every number it shows
describes the SIMULATOR, not a real model.

On the dashboard (a terminal, without --no-tui) it runs until you quit, and
its load steps through 4, 8, 16, 24 and 8 streams, 20 s each, over and over:
the queue fills past the 8 batch slots, queue wait takes over the TTFT, and
the queue drains. Headless it runs 12 streams for 20 s and prints the summary.
--concurrency, --rate, --steps or --duration replace those defaults.

` + aggregate.MetricDefinitions,
		Example: `  latscope demo
  latscope demo --no-tui --duration 10s --concurrency 32 --json
  latscope demo --tokenizer-pool 0 --prompt-tokens 8192:4096
  latscope demo --rtt 150ms          # a client in another region
  latscope demo --record demo.lsr && latscope report demo.lsr -o demo.html`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return repeatable(cmd, &f, repeat, func() error { return runDemo(cmd, &f, srv) })
		},
	}
	cmd.Flags().StringVar(&srv.Profile, "profile", "h100-7b", "simulated server profile: h100-7b or tiny")
	cmd.Flags().IntVar(&srv.MaxNumSeqs, "max-num-seqs", 8, "simulated batch slots (fewer than --concurrency shows queueing)")
	cmd.Flags().IntVar(&srv.TokenizerPool, "tokenizer-pool", 0, "simulated tokenizer workers (0: tokenize on the server's event loop)")
	cmd.Flags().IntVar(&srv.PrefixCacheTokens, "prefix-cache-tokens", 0, "the simulator's prefix cache in tokens, LRU (0: off, or 1048576 with --conversation); small forces eviction")
	cmd.Flags().BoolVar(&srv.KeepAbandoned, "keep-abandoned", false, "the simulator keeps decoding for a client that went away (see --cancel-after), holding its slot")
	f.register(cmd.Flags())
	f.registerView(cmd.Flags())
	addRepeatFlags(cmd.Flags(), &repeat)
	// Demo defaults: enough load to queue behind 8 slots; headless, short
	// enough to wait for (the dashboard runs until quit).
	// (through the flag's own value, so the flag does not count as given).
	c := cmd.Flags().Lookup("concurrency")
	_ = c.Value.Set("12")
	c.DefValue = "12"
	registerDeployFlags(cmd.Flags(), &srv.Deploy) // --no-proxy, --rtt, --jitter
	return cmd
}

// demoSteps is the demo's stepped load on the dashboard, 20 s a step.
const demoSteps = "4,8,16,24,8"

// demoPrefixCacheTokens is the demo's prefix cache with --conversation and
// no --prefix-cache-tokens: room for every session's turns.
const demoPrefixCacheTokens = 1 << 20

func runDemo(cmd *cobra.Command, f *loadFlags, srv session.DemoServer) error {
	ctx := cmd.Context()
	if !cmd.Flags().Changed("duration") && !cmd.Flags().Changed("requests") && !cmd.Flags().Changed("trace") {
		if useDashboard(cmd.OutOrStdout(), f.noTUI) {
			f.untilStopped = true // until q
		} else {
			f.duration = 20 * time.Second
		}
	}
	// On the dashboard the demo tells its story by itself: the load steps
	// past the 8 batch slots, so the queue fills, takes over the TTFT, and
	// drains again.
	fixedLoad := cmd.Flags().Changed("concurrency") || cmd.Flags().Changed("rate") || cmd.Flags().Changed("steps") || cmd.Flags().Changed("trace")
	if f.untilStopped && !fixedLoad {
		f.steps, f.repeatSteps = demoSteps, true
	}
	if srv.PrefixCacheTokens == 0 && f.conversation != "" {
		srv.PrefixCacheTokens = demoPrefixCacheTokens
	}
	if f.joinWait == attribute.DefaultJoinWait {
		// The simulator exports spans every few tens of ms; no need to wait long.
		f.joinWait = 500 * time.Millisecond
	}
	srv.Seed, srv.GPUInterval = f.seed.Value(), f.gpuInterval
	target, extras, stop, err := srv.Start(ctx)
	if err != nil {
		return err
	}
	defer stop()
	return runSession(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), target, f, extras)
}
