package main

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/attribute"
	"github.com/latscope/latscope/bench"
	"github.com/latscope/latscope/collector"
	"github.com/latscope/latscope/otlpexport"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/session"
)

// loadFlags are the probe and collector settings shared by run and demo.
type loadFlags struct {
	dialect, model, apiKey string
	headers                []string
	concurrency            int
	rate                   float64
	arrival                string
	burstiness             float64
	duration               time.Duration
	requests, warmup       int
	drain                  time.Duration
	promptTokens           string
	outputTokens           string
	promptFile             string
	sharedPrefix           int
	conversation           string
	cancelAfter            string
	timeout                time.Duration
	maxEventBytes          int
	seed                   session.Seed
	shard                  probe.Shard // an agent's share of a fleet's load (agent --shard)
	startAt                time.Time   // agent --start-at: when a fleet's shards begin together
	caCert                 string
	insecure               bool
	http2, h2c             bool // speak HTTP/2: over TLS (ALPN), or without (prior knowledge)
	connections            int  // the HTTP/2 connections the streams are spread over

	steps        string
	stepDuration time.Duration
	repeatSteps  bool

	trace      string
	traceSpeed float64

	noTUI        bool
	noColor      bool
	window       string
	jsonOut      bool
	untilStopped bool // with neither --duration nor --requests, run until Ctrl-C (the agent)
	slo          string
	ttftBasis    string

	record          string
	recordOverwrite bool
	otlpExport      string
	flushTimeout    time.Duration

	metricsURL     string
	noMetrics      bool
	scrapeInterval time.Duration
	otlpListen     string
	joinWait       time.Duration
	gpuDevices     string
	gpuMetricsURLs []string
	gpuInterval    time.Duration
	noGPU          bool
}

func (f *loadFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.dialect, "dialect", "auto", "request format: auto, "+strings.Join(probe.Dialects(), ", "))
	fl.StringVar(&f.model, "model", "", "model name (default: the first one the server lists)")
	fl.StringVar(&f.apiKey, "api-key", "", "bearer token (default: $OPENAI_API_KEY)")
	fl.StringArrayVar(&f.headers, "header", nil, `extra request header "Name: value" (repeatable); sent with every call to the server, never to another host`)
	fl.StringVar(&f.caCert, "ca-cert", "", "PEM file of certificate authorities to trust for an https server, besides the system's")
	fl.BoolVar(&f.insecure, "insecure", false, "do not verify the https server's certificate (said loudly on stderr)")
	fl.IntVarP(&f.concurrency, "concurrency", "c", 1, "closed loop: concurrent streams, each waiting for its own response")
	fl.StringVar(&f.steps, "steps", "", "stepped closed loop: concurrencies one after another, e.g. 4,8,16,24 (each for --step-duration)")
	fl.DurationVar(&f.stepDuration, "step-duration", 20*time.Second, "how long each of --steps lasts")
	fl.BoolVar(&f.repeatSteps, "repeat-steps", false, "start --steps over when they end (until --duration or Ctrl-C)")
	fl.Float64VarP(&f.rate, "rate", "r", 0, "open loop: requests per second (overrides closed loop)")
	fl.StringVar(&f.arrival, "arrival", "poisson", "open-loop arrivals: poisson, constant or gamma")
	fl.Float64Var(&f.burstiness, "burstiness", 1, "gamma shape: 1 = poisson, <1 burstier, >1 smoother")
	fl.StringVar(&f.trace, "trace", "", "open loop on a trace's schedule, with its prompt and output lengths: a latscope recording, JSONL or CSV (timestamp,prompt_tokens,output_tokens), the Azure LLM inference trace CSV or the Mooncake trace JSONL")
	fl.Float64Var(&f.traceSpeed, "trace-speed", 1, "replay --trace this many times as fast (2: twice the rate)")
	fl.DurationVarP(&f.duration, "duration", "d", 0, "stop after this long (default 30s when --requests is not set)")
	fl.IntVarP(&f.requests, "requests", "n", 0, "stop after this many requests (warm-up not counted)")
	fl.IntVar(&f.warmup, "warmup", 0, "warm-up requests sent first and kept out of the statistics")
	fl.DurationVar(&f.drain, "drain", 30*time.Second, "after --duration, let requests in flight finish for up to this long (then they are recorded as cancelled)")
	fl.StringVar(&f.promptTokens, "prompt-tokens", "512", "prompt length in server tokens: N or MEAN:STDDEV")
	fl.StringVar(&f.outputTokens, "output-tokens", "128", "output length in tokens: N or MEAN:STDDEV")
	fl.StringVar(&f.promptFile, "prompt-file", "", "real prompts, one per line (JSON {\"prompt\"|\"messages\"} or plain text)")
	fl.IntVar(&f.sharedPrefix, "shared-prefix", 0, "identical leading tokens in every prompt (to measure a prefix cache on purpose)")
	fl.StringVar(&f.conversation, "conversation", "", "chat sessions (closed loop: a stream per user; --rate: turns of waiting sessions first): turns=N[,think=D]; each turn's prompt is the conversation so far and a new message (--prompt-tokens long), the answers as the model gave them")
	fl.StringVar(&f.cancelAfter, "cancel-after", "", "abandon requests as a user who presses stop: tokens=N or time=D, then ,share=S (0-1, default 1); they end abandoned, never errors")
	fl.DurationVar(&f.timeout, "timeout", 5*time.Minute, "limit for one request, send to end of stream (0: none); also bounds each call before the run, to at most 10s")
	fl.IntVar(&f.maxEventBytes, "max-event-bytes", probe.DefaultMaxEventBytes, "largest stream event accepted (at most 1 GiB); a larger one fails that request")
	fl.Var(&f.seed, "seed", "seed for prompts and arrivals, to repeat a run's prompts; random: one drawn per run, so a server's prompt cache cannot serve one run's prompts to the next")
	fl.StringVar(&f.record, "record", "", "record the session to this file (zstd-compressed events; replay it with latscope replay, summarise it with latscope report)")
	fl.BoolVar(&f.recordOverwrite, "record-overwrite", false, "let --record replace an existing regular file (it keeps its mode and owner; a new file is made 0600)")
	fl.StringVar(&f.otlpExport, "otlp-export", "", "send each request as an OpenTelemetry trace (one span per stage) to this OTLP/HTTP endpoint, e.g. http://127.0.0.1:4318")
	fl.DurationVar(&f.flushTimeout, "flush-timeout", otlpexport.DefaultFlushTimeout, "at the end, wait at most this long for --otlp-export's collector to take the spans still queued (the rest are counted as not sent)")
	fl.StringVar(&f.slo, "slo", "", `objectives that set the exit code, e.g. "ttft.p99<500ms,itl.p99<50ms"`)
	fl.StringVar(&f.ttftBasis, "ttft-basis", string(aggregate.BasisAnswer), "which first token the TTFT bar, goodput and --slo's ttft use: answer (after a reasoning model's thinking; the first token otherwise) or first (any token, reasoning included)")
	fl.StringVar(&f.metricsURL, "metrics-url", "", "server Prometheus metrics (default: the target's /metrics)")
	fl.BoolVar(&f.noMetrics, "no-metrics", false, "do not scrape server metrics")
	fl.DurationVar(&f.scrapeInterval, "scrape-interval", collector.DefaultScrapeInterval, "time between metrics scrapes")
	fl.StringVar(&f.otlpListen, "otlp-listen", "", "receive the server's OTLP/HTTP trace spans on this address, e.g. 127.0.0.1:4318 (default off)")
	fl.DurationVar(&f.joinWait, "otlp-join-wait", attribute.DefaultJoinWait, "how long a finished request waits for its server span")
	fl.StringVar(&f.gpuDevices, "gpu", "", "GPU indices to watch, e.g. 0,2 (default all)")
	fl.StringArrayVar(&f.gpuMetricsURLs, "gpu-metrics-url", nil, "read the GPUs from NVIDIA's dcgm-exporter or AMD's device-metrics-exporter pages instead of the local NVML (repeatable or comma-separated; dns+http://host:port/metrics scrapes every address host resolves to)")
	fl.DurationVar(&f.gpuInterval, "gpu-interval", time.Second, "time between GPU samples")
	fl.BoolVar(&f.noGPU, "no-gpu", false, "do not read GPU stats")
}

// registerHTTP2 adds the HTTP/2 flags (run, sweep, agent: the commands
// that measure a server of their own).
func (f *loadFlags) registerHTTP2(fl *pflag.FlagSet) {
	fl.BoolVar(&f.http2, "http2", false, "speak HTTP/2 to an https server (ALPN h2; a server without it is an error), the streams spread over --connections")
	fl.BoolVar(&f.h2c, "h2c", false, "speak HTTP/2 without TLS to an http server known to speak it (prior knowledge), the streams spread over --connections")
	fl.IntVar(&f.connections, "connections", 1, "with --http2 or --h2c: the connections the streams are spread over, taken in turn (1 to "+strconv.Itoa(probe.MaxH2Connections)+")")
}

// registerView adds the flags of the commands that show a dashboard or
// print a summary (not the agent: its clients do both).
func (f *loadFlags) registerView(fl *pflag.FlagSet) {
	fl.BoolVar(&f.noTUI, "no-tui", false, "headless: a status line a second on stderr, the final table on stdout (also when stdout is not a terminal)")
	fl.BoolVar(&f.noColor, "no-color", false, "dashboard without colour: stages told apart by letters (also NO_COLOR=1)")
	fl.StringVar(&f.window, "window", "10s", "the dashboard's window at start: 10s, 1m, 5m or run (w cycles)")
	fl.BoolVar(&f.jsonOut, "json", false, "print the final summary as one JSON object on stdout instead of the table")
}

func newRunCmd() *cobra.Command {
	var (
		f      loadFlags
		target string
		repeat repeatFlags
		prof   string
	)
	cmd := &cobra.Command{
		Use:   "run --url URL",
		Short: "Measure a real server: synthetic streaming load, every stage timed",
		Long: `run streams synthetic requests to an OpenAI-compatible server (vLLM, SGLang,
TGI, llama.cpp, Ollama, Triton, ...) or a native stream, times every stage a
client can see, scrapes the server's metrics and the GPU, and prints where the
time went.

` + aggregate.MetricDefinitions,
		Example: `  latscope run --url http://127.0.0.1:8000 --no-tui --duration 20s --concurrency 16 --prompt-tokens 512 --output-tokens 128
  latscope run --url http://127.0.0.1:8000 --no-tui --rate 20 --duration 1m --json
  latscope run --url http://127.0.0.1:8080 --dialect llamacpp --no-tui -n 50 --slo 'ttft.p99<500ms,itl.p99<50ms'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if target == "" {
				return errors.New("--url is required, e.g. --url http://127.0.0.1:8000 (or try `latscope demo`)")
			}
			stop, err := bench.StartCPUProfile(prof)
			if err != nil {
				return err
			}
			defer stop()
			return repeatable(cmd, &f, repeat, func() error {
				return runSession(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), target, &f, nil)
			})
		},
	}
	cmd.Flags().StringVar(&target, "url", "", "the server's base URL, e.g. http://127.0.0.1:8000")
	f.register(cmd.Flags())
	f.registerHTTP2(cmd.Flags())
	f.registerView(cmd.Flags())
	addRepeatFlags(cmd.Flags(), &repeat)
	cmd.Flags().StringVar(&prof, "cpu-profile", "", "write this process's CPU profile to this file (go tool pprof; bench idle --cpu-profile-dir uses it)")
	_ = cmd.Flags().MarkHidden("cpu-profile")
	return cmd
}
