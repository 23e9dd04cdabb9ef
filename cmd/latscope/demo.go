package main

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/spf13/cobra"

	"github.com/latscope/latscope/attribute"
	"github.com/latscope/latscope/collector"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/session"
	"github.com/latscope/latscope/sim"
)

func newDemoCmd() *cobra.Command {
	var (
		f          loadFlags
		profile    string
		maxNumSeqs int
		pool       int
		deploy     sim.Deployment
		repeat     repeatFlags
		modes      demoModes
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

` + metricDefinitions,
		Example: `  latscope demo
  latscope demo --no-tui --duration 10s --concurrency 32 --json
  latscope demo --tokenizer-pool 0 --prompt-tokens 8192:4096
  latscope demo --rtt 150ms          # a client in another region
  latscope demo --record demo.lsr && latscope report demo.lsr -o demo.html`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return repeatable(cmd, &f, repeat, func() error { return runDemo(cmd, &f, profile, maxNumSeqs, pool, deploy, modes) })
		},
	}
	cmd.Flags().StringVar(&profile, "profile", "h100-7b", "simulated server profile: h100-7b or tiny")
	cmd.Flags().IntVar(&maxNumSeqs, "max-num-seqs", 8, "simulated batch slots (fewer than --concurrency shows queueing)")
	cmd.Flags().IntVar(&pool, "tokenizer-pool", 0, "simulated tokenizer workers (0: tokenize on the server's event loop)")
	cmd.Flags().IntVar(&modes.prefixTokens, "prefix-cache-tokens", 0, "the simulator's prefix cache in tokens, LRU (0: off, or 1048576 with --conversation); small forces eviction")
	cmd.Flags().BoolVar(&modes.keepAbandoned, "keep-abandoned", false, "the simulator keeps decoding for a client that went away (see --cancel-after), holding its slot")
	f.register(cmd.Flags())
	f.registerView(cmd.Flags())
	addRepeatFlags(cmd.Flags(), &repeat)
	// Demo defaults: enough load to queue behind 8 slots; headless, short
	// enough to wait for (the dashboard runs until quit).
	// (through the flag's own value, so the flag does not count as given).
	c := cmd.Flags().Lookup("concurrency")
	_ = c.Value.Set("12")
	c.DefValue = "12"
	registerDeployFlags(cmd.Flags(), &deploy) // --no-proxy, --rtt, --jitter
	return cmd
}

// demoSteps is the demo's stepped load on the dashboard, 20 s a step.
const demoSteps = "4,8,16,24,8"

// demoModes are the simulator's modes the demo lets a user turn on.
type demoModes struct {
	prefixTokens  int
	keepAbandoned bool
}

// demoPrefixCacheTokens is the demo's prefix cache with --conversation and
// no --prefix-cache-tokens: room for every session's turns.
const demoPrefixCacheTokens = 1 << 20

func runDemo(cmd *cobra.Command, f *loadFlags, profileName string, maxNumSeqs, pool int, deploy sim.Deployment, modes demoModes) error {
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
	prof, err := sim.ProfileByName(profileName)
	if err != nil {
		return fmt.Errorf("--profile: %w", err)
	}
	// The span receiver's port first, so the simulator can be told where to
	// send; the receiver runs as one of the session's sources.
	serveCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	otlpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen for spans: %w", err)
	}
	recv := collector.NewOTLPReceiver(collector.OTLPConfig{Listener: otlpLn})

	if modes.prefixTokens == 0 && f.conversation != "" {
		modes.prefixTokens = demoPrefixCacheTokens
	}
	blocks, err := prefixCacheBlocks(0, modes.prefixTokens)
	if err != nil {
		return err
	}
	srv, err := sim.New(sim.Config{
		Profile: prof, MaxNumSeqs: maxNumSeqs, TokenizerPool: pool, Seed: f.seed.value(), ServerTiming: true,
		OTLPEndpoint:      "http://" + otlpLn.Addr().String() + "/v1/traces",
		PrefixCacheBlocks: blocks, KeepAbandoned: modes.keepAbandoned,
	})
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen for the simulator: %w", err)
	}
	deploy.Network.Seed = f.seed.value()
	if err := deploy.Network.Validate(); err != nil {
		return fmt.Errorf("--rtt, --jitter: %w", err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = deploy.Serve(serveCtx, srv, ln)
	}()
	defer func() { stop(); <-served }()

	gpu := collector.NewSimulatedGPU(collector.GPUConfig{Interval: f.gpuInterval}, func() collector.SimLoad {
		st := srv.Stats()
		return collector.SimLoad{BusyFraction: st.Busy, BatchSize: st.BatchSize, KVUsage: st.KVUsage}
	})
	if f.joinWait == attribute.DefaultJoinWait {
		// The simulator exports spans every few tens of ms; no need to wait long.
		f.joinWait = 500 * time.Millisecond
	}
	label := fmt.Sprintf("latscope demo: SIMULATED %s server on http://%s (%d slots; %s) - numbers describe the simulator, not a real model; GPU is simulated too",
		prof.Name, ln.Addr(), maxNumSeqs, deploy.Describe())
	return runSession(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), "http://"+ln.Addr().String(), f,
		&session.Extras{Collectors: []pipeline.Source{gpu}, Spans: recv, Label: label, Simulated: true})
}
