package main

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/latscope/latscope/sim"
)

// simLong is `latscope sim --help`'s text.
const simLong = `sim serves an OpenAI-compatible API (/v1/chat/completions, /v1/completions,
/v1/responses, /tokenize, /v1/models, /health) and vLLM-named Prometheus metrics on /metrics,
from a simulated serving stack: a shared front-end loop, a continuous-batching
scheduler with chunked prefill, and an engine whose steps slow down as the
batch grows. No model runs; the text is filler.

It is deployed as servers typically are: behind an nginx-like proxy hop (its
own accept, parsing, request-body buffering and upstream connection), which adds a Server-Timing
metric (proxy); --no-proxy drops it. Clients are --rtt away (default 1 ms, the
same region), with --jitter on each one-way trip: every request's bytes and
every frame are delayed (frames pipeline on one connection); the TCP
handshake is the kernel's and is not. Each stream reports its stages in a
Server-Timing header (http, tokenize, headers) and trailer (http, loop_wait,
tokenize, queue, prefill, first_decode, detokenize, sse_framing, other,
first_frame, decode); --no-server-timing leaves them out, as vLLM does.

Faults (--fault, or per request with the X-Latscope-Fault header) are a
comma-separated list of: status=429|500|503, reset-after=N, malformed-after=N,
error-after=N (an error event and [DONE] inside the 200 stream, as vLLM and
SGLang send), stall=MS, slow-headers=MS, oversized, split-utf8.

Modes make it behave like servers other than vLLM; all are off by default:
  --headers slotted          headers when a batch slot takes the request (llama-server),
                             so waiting for headers includes the queue;
  --headers first-token      headers with the first token (llm-d's simulator);
                             the model list says which (latscope_headers), so
                             latscope run detects latscope-sim-slotted or -first-token;
  --close-after-stream       a streamed response leaves its connection dead without
                             Connection: close (llama-server): the client's next request
                             on it fails (EOF) before any response byte;
  --prefix-cache-blocks N    cross-request prefix cache of N 16-token blocks (LRU):
                             cached prompt tokens skip prefill and are reported as
                             usage.prompt_tokens_details.cached_tokens;
  --prefix-cache-tokens N    the same cache sized in tokens (whole blocks); a small one
                             evicts, so a conversation's earlier turns stop hitting;
  --keep-abandoned           keep generating for a client that went away, holding its slot;
  --no-chunked-prefill       prefill each prompt whole in a step of its own, which every
                             decoding stream waits for;
  --loading 30s              answer 503 "Loading model" (and /health not ready) for this
                             long after start; /metrics still answers;
  --disagg                   disaggregated prefill and decode: --prefill-workers N (default 1)
                             prefill one prompt each at a time; the KV cache then crosses a
                             link (--kv-latency + --kv-bytes-per-token × prompt tokens /
                             --kv-bandwidth, bytes per second); the least busy of
                             --decode-workers N engines decodes. The trailer's stages become
                             prefill_queue, prefill, kv_transfer, decode_queue, first_decode;
  --nagle                    Nagle's algorithm on and each SSE event written in two pieces.
                             The ~40 ms delayed-ACK stall is EMULATED (loopback does not
                             produce it): a write while an earlier one is unacknowledged is
                             held for 40 ms, then released with everything held since.

--reasoning-tokens N makes it a reasoning model: the first N deltas of a chat
stream are thinking, in delta.reasoning (or delta.reasoning_content with
--reasoning-field reasoning_content), and of a Responses stream
response.reasoning_text.delta events; then comes the answer. They count within
max_tokens and in the usage's reasoning_tokens.

--background-rate R sends the simulator's own mixed "user" traffic (Poisson
arrivals, lengths within ±50% of --background-prompt-tokens and
--background-output-tokens) through the same front end, queue and engine, so
latscope watch has real traffic to show; GET /latscope/truth/background gives the
true queue, prefill, decode and end-to-end seconds summed over it.

The ground truth (X-Latscope-Truth: 1) reports cached tokens, when the headers
went out, the prefill steps on the wall clock, and the frames Nagle held.`

// newSimCmd runs the built-in simulated LLM server.
func newSimCmd() *cobra.Command {
	var sf simFlags
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run the built-in simulated LLM server",
		Long:  simLong,
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return sf.run(cmd) },
	}
	sf.register(cmd.Flags())
	return cmd
}

// simFlags are sim's flags: most go straight into the simulator's Config.
type simFlags struct {
	listen, profile, fault, headers, reasoningField string
	tls                                             bool
	tlsCert, tlsKey                                 string
	cfg                                             sim.Config
	deploy                                          sim.Deployment
	noServerTiming                                  bool
	prefixTokens                                    int // --prefix-cache-tokens
}

func (sf *simFlags) register(fl *pflag.FlagSet) {
	c := &sf.cfg
	fl.StringVar(&sf.listen, "listen", "127.0.0.1:8000", "address to listen on")
	fl.StringVar(&sf.profile, "profile", "h100-7b", "cost profile: "+strings.Join(sim.ProfileNames(), ", "))
	fl.StringVar(&c.Model, "model", sim.DefaultModel, "served model name")
	fl.IntVar(&c.MaxNumSeqs, "max-num-seqs", 0, "batch slots (0: the profile's)")
	fl.IntVar(&c.MaxBatchedTokens, "max-num-batched-tokens", 0, "token budget per engine step, for chunked prefill (0: the profile's)")
	fl.IntVar(&c.TokenizerPool, "tokenizer-pool", 0, "tokenizer workers; 0 tokenizes on the shared loop, stalling every stream")
	fl.StringVar(&sf.fault, "fault", "", "fault spec applied to --fault-rate of requests, e.g. stall=200,reset-after=5")
	fl.Float64Var(&c.FaultRate, "fault-rate", 1, "fraction of requests that get --fault")
	fl.StringVar(&c.OTLPEndpoint, "otlp-traces-endpoint", "", "send one llm_request span per request to this OTLP/HTTP URL, e.g. http://127.0.0.1:4318/v1/traces")
	fl.Int64Var(&c.Seed, "seed", 1, "seed for the generated text, EOS points and fault draws")
	fl.StringVar(&sf.headers, "headers", string(sim.HeadersAtOnce), "when a stream's headers are sent: at-once (vLLM), slotted (llama-server) or first-token (llm-d sim)")
	fl.BoolVar(&c.CloseAfterStream, "close-after-stream", false, "leave a connection dead after a streamed response, without Connection: close (llama-server)")
	fl.IntVar(&c.PrefixCacheBlocks, "prefix-cache-blocks", 0, "cross-request prefix cache of this many 16-token blocks, LRU (0: off)")
	fl.IntVar(&sf.prefixTokens, "prefix-cache-tokens", 0, "the same, sized in tokens (rounded up to whole 16-token blocks); small forces eviction")
	fl.BoolVar(&c.KeepAbandoned, "keep-abandoned", false, "keep generating for clients that went away instead of aborting")
	fl.BoolVar(&c.NoChunkedPrefill, "no-chunked-prefill", false, "prefill each prompt whole in a step that decoding streams wait for")
	fl.DurationVar(&c.Loading, "loading", 0, "answer 503 \"Loading model\" for this long after start (0: ready at once)")
	fl.IntVar(&c.Reasoning.Tokens, "reasoning-tokens", 0, "a reasoning model: the first N deltas of a chat or Responses stream are thinking (0: none)")
	fl.StringVar(&sf.reasoningField, "reasoning-field", sim.ReasoningField, "the chat delta field the thinking streams in: reasoning (newer vLLM) or reasoning_content (older vLLM, SGLang, DeepSeek, llama.cpp)")
	fl.Float64Var(&c.Background.Rate, "background-rate", 0, "send the simulator's own \"user\" traffic at this many requests/s (Poisson), seen in /metrics and its traces, truth at "+sim.BackgroundTruthPath+" (0: none)")
	fl.IntVar(&c.Background.PromptTokens, "background-prompt-tokens", 256, "mean prompt tokens of the background traffic (each request within ±50%)")
	fl.IntVar(&c.Background.OutputTokens, "background-output-tokens", 128, "mean output tokens of the background traffic (each request within ±50%)")
	fl.BoolVar(&c.Nagle, "nagle", false, "Nagle's algorithm on, SSE events in two writes, delayed-ACK stalls emulated")
	registerDisaggFlags(fl, &c.Disagg)
	registerDeployFlags(fl, &sf.deploy)
	fl.BoolVar(&c.H2C, "h2c", false, "also speak HTTP/2 without TLS (prior knowledge, as latscope run --h2c) on the same port")
	fl.BoolVar(&sf.tls, "tls", false, "serve HTTPS (HTTP/2 and HTTP/1.1 through ALPN) with a self-signed certificate made at start (clients: --insecure)")
	fl.StringVar(&sf.tlsCert, "tls-cert", "", "serve HTTPS with this certificate (PEM) instead of a self-signed one; needs --tls-key")
	fl.StringVar(&sf.tlsKey, "tls-key", "", "the --tls-cert certificate's private key (PEM)")
	fl.BoolVar(&sf.noServerTiming, "no-server-timing", false, "report no stage in Server-Timing (as vLLM): only the proxy's, and the metrics, say where the time went")
}

// config reads the flags that need reading into the simulator's Config
// (sim.Config.Validate owns its rules), and the deployment for it with its
// description; faultRateGiven says --fault-rate was set.
func (sf *simFlags) config(faultRateGiven bool) (sim.Config, string, error) {
	cfg := sf.cfg
	if err := cfg.Read(sim.Written{Profile: sf.profile, ReasoningField: sf.reasoningField, Headers: sf.headers, Fault: sf.fault,
		PrefixCacheTokens: sf.prefixTokens, FaultRateGiven: faultRateGiven}); err != nil {
		return cfg, "", err
	}
	var err error
	cfg.ServerTiming = !sf.noServerTiming
	if cfg.TLS, err = sim.TLSFor(sf.tlsCert, sf.tlsKey, sf.tls); err != nil {
		return cfg, "", err
	}
	if err := cfg.Validate(); err != nil {
		return cfg, "", fmt.Errorf("sim: %w", err)
	}
	var deployment string
	sf.deploy, deployment, err = sf.deploy.For(cfg)
	return cfg, deployment, err
}

// run serves the simulator until the command's context ends.
func (sf *simFlags) run(cmd *cobra.Command) error {
	cfg, deployment, err := sf.config(cmd.Flags().Changed("fault-rate"))
	if err != nil {
		return err
	}
	if err := disaggFlagsNeedDisagg(cmd.Flags(), cfg.Disagg); err != nil {
		return err
	}
	srv, err := sim.New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", sf.listen)
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("listen on %s: %w", sf.listen, err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "latscope sim: simulated %s server on %s://%s (not a real model); %s%s\n",
		cfg.Profile.Name, cfg.Scheme(), ln.Addr(), deployment, cfg.ProtocolsNote(sf.tlsCert == ""))
	serveErr := sf.deploy.Serve(cmd.Context(), srv, ln)
	closeErr := srv.Close()
	return errors.Join(serveErr, closeErr)
}

// registerDeployFlags adds the simulated deployment's flags (sim, demo).
func registerDeployFlags(fl *pflag.FlagSet, d *sim.Deployment) {
	fl.BoolVar(&d.NoProxy, "no-proxy", false, "no proxy hop in front of the simulated server")
	fl.DurationVar(&d.Network.RTT, "rtt", sim.DefaultRTT, "emulated network round trip to the clients, half each way (0: none)")
	fl.DurationVar(&d.Network.Jitter, "jitter", 0, "emulated jitter on each one-way trip, uniform within ±this")
}

// registerDisaggFlags adds the disaggregated deployment's flags.
func registerDisaggFlags(fl *pflag.FlagSet, d *sim.Disagg) {
	fl.BoolVar(&d.Enabled, "disagg", false, "disaggregated prefill and decode: a prefill pool, a KV-cache link and a decode pool")
	fl.IntVar(&d.PrefillWorkers, "prefill-workers", 1, "--disagg: prefill workers, one prompt each at a time")
	fl.IntVar(&d.DecodeWorkers, "decode-workers", 1, "--disagg: decode workers, each a continuous-batching engine")
	fl.Int64Var(&d.KVBytesPerToken, "kv-bytes-per-token", sim.DefaultKVBytesPerToken, "--disagg: bytes of KV cache per prompt token on the link")
	fl.Float64Var(&d.KVBandwidth, "kv-bandwidth", sim.DefaultKVBandwidth, "--disagg: the KV link's bandwidth, bytes per second")
	fl.DurationVar(&d.KVLatency, "kv-latency", 0, "--disagg: the fixed cost of one KV transfer")
}

// disaggFlagsNeedDisagg refuses the link's and the pools' flags without
// --disagg, where they would do nothing.
func disaggFlagsNeedDisagg(fl *pflag.FlagSet, d sim.Disagg) error {
	if d.Enabled {
		return nil
	}
	for _, name := range []string{"prefill-workers", "decode-workers", "kv-bytes-per-token", "kv-bandwidth", "kv-latency"} {
		if fl.Changed(name) {
			return fmt.Errorf("--%s needs --disagg", name)
		}
	}
	return nil
}
