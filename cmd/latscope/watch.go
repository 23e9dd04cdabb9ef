package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/session"
	"github.com/latscope/latscope/tui"
)

// watchLong is `latscope watch --help`'s text.
const watchLong = `watch shows where the time of a server's own traffic goes, from the server's
Prometheus metrics (vLLM, SGLang, TGI, TensorRT-LLM, LMDeploy; llama.cpp's
per-token counters): per window, the share of queue, prefill, decode and the
rest of end-to-end, TTFT, ITL and end-to-end quantiles estimated from the
histograms' buckets (each with the bucket it lies in), request and token
rates, queue depth, KV-cache use, preemptions and prefix-cache hits. It sends
no load of its own unless asked.

--canary-rate R adds a steady synthetic load of R requests/s (constant
arrivals, short prompts): the canary. Its requests are marked as the
canary's in every output (screen, recording, report, agent feed), and the
screen shows your users (the histograms) and the canary (the client's own
timing) side by side. The server's histograms count the canary's requests
too: a light canary barely moves them.

--otlp-listen ADDR receives the server's own spans (vLLM
--otlp-traces-endpoint): each request they give that is not the canary's
is listed in the requests view as a user's (server-reported, with its
waterfall) and counted apart from the canary.

--ssh ADDR serves this dashboard over SSH, as agent --ssh does.`

// watchKeep are the loadFlags that watch takes (the rest shape a load it
// does not send).
var watchKeep = map[string]bool{
	"dialect": true, "model": true, "api-key": true, "header": true, "ca-cert": true, "insecure": true,
	"duration": true, "prompt-tokens": true, "output-tokens": true, "timeout": true, "seed": true,
	"record": true, "record-overwrite": true, "metrics-url": true, "scrape-interval": true,
	"otlp-listen": true, "otlp-join-wait": true, "gpu": true, "gpu-metrics-url": true, "gpu-interval": true,
	"no-gpu": true, "max-event-bytes": true,
}

func newWatchCmd() *cobra.Command {
	var (
		f          loadFlags
		target     string
		canaryRate float64
		ssh        session.SSH
	)
	cmd := &cobra.Command{
		Use:   "watch --url URL",
		Short: "Watch a server's own traffic, stage by stage, from its metrics (and a canary beside it)",
		Long:  watchLong,
		Example: `  latscope watch --url http://127.0.0.1:8000
  latscope watch --url http://127.0.0.1:8000 --canary-rate 0.5
  latscope watch --url http://127.0.0.1:8000 --no-tui -d 30s --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if target == "" {
				return errors.New("--url is required, e.g. --url http://127.0.0.1:8000")
			}
			f.untilStopped = !cmd.Flags().Changed("duration")
			return runWatch(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), target, &f, canaryRate, ssh)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&target, "url", "", "the server's base URL, e.g. http://127.0.0.1:8000")
	fl.Float64Var(&canaryRate, "canary-rate", 0, "send a steady canary of this many requests/s beside the server's own traffic (0: none)")
	all := pflag.NewFlagSet("load", pflag.ContinueOnError)
	f.register(all)
	f.promptTokens, f.outputTokens = "128", "32" // a light canary
	all.VisitAll(func(flag *pflag.Flag) {
		if watchKeep[flag.Name] {
			switch flag.Name {
			case "prompt-tokens":
				flag.DefValue, flag.Usage = f.promptTokens, "the canary's prompt length in server tokens: N or MEAN:STDDEV"
			case "output-tokens":
				flag.DefValue, flag.Usage = f.outputTokens, "the canary's output length in tokens: N or MEAN:STDDEV"
			case "duration":
				flag.Usage = "stop after this long (default: until q or Ctrl-C)"
			}
			fl.AddFlag(flag)
		}
	})
	f.registerView(fl)
	registerSSHFlags(fl, &ssh)
	return cmd
}

// runWatch watches target's own traffic, with a canary at canaryRate
// (session.Watch).
func runWatch(ctx context.Context, stdout, stderr io.Writer, target string, f *loadFlags, canaryRate float64, ssh session.SSH) error {
	if err := session.CheckCanaryRate(canaryRate); err != nil {
		return err
	}
	window, err := tui.ParseWindow(f.window)
	if err != nil {
		return fmt.Errorf("--window: %w", err)
	}
	if err := f.outputs().Check(); err != nil {
		return err
	}
	f.rate, f.arrival, f.drain = canaryRate, probe.ArrivalConstant, 5*time.Second
	o, err := f.sessionOptions(stderr, target)
	if err != nil {
		return err
	}
	c := session.WatchConfig{
		Session: o, Outputs: f.outputs(), CanaryRate: canaryRate, SSH: ssh, Duration: f.duration, JSON: f.jsonOut,
		View: tui.Options{Window: window, NoColor: f.noColor},
	}
	if useDashboard(stdout, f.noTUI) {
		c.Screen = showDashboard
	}
	return session.Watch(ctx, stdout, stderr, c)
}
