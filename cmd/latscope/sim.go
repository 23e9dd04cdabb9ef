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

// newSimCmd runs the built-in simulated LLM server.
func newSimCmd() *cobra.Command {
	var (
		listen, profile, model, fault, otlp string
		maxSeqs, maxBatched, tokPool        int
		faultRate                           float64
		seed                                int64
		modes                               sim.Config // the behaviours of other servers
		headers, reasoningField             string
		deploy                              sim.Deployment
		noServerTiming                      bool
	)
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run the built-in simulated LLM server",
		Long: `sim serves an OpenAI-compatible API (/v1/chat/completions, /v1/completions,
/v1/responses, /tokenize, /v1/models, /health) and vLLM-named Prometheus metrics on /metrics,
from a simulated serving stack: a shared front-end loop, a continuous-batching
scheduler with chunked prefill, and an engine whose steps slow down as the
batch grows. No model runs; the text is filler.

It is deployed as servers typically are: behind an nginx-like proxy hop (its
own accept, parsing and upstream connection), which adds a Server-Timing
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
  --keep-abandoned           keep generating for a client that went away, holding its slot;
  --no-chunked-prefill       prefill each prompt whole in a step of its own, which every
                             decoding stream waits for;
  --loading 30s              answer 503 "Loading model" (and /health not ready) for this
                             long after start; /metrics still answers;
  --nagle                    Nagle's algorithm on and each SSE event written in two pieces.
                             The ~40 ms delayed-ACK stall is EMULATED (loopback does not
                             produce it): a write while an earlier one is unacknowledged is
                             held for 40 ms, then released with everything held since.

--reasoning-tokens N makes it a reasoning model: the first N deltas of a chat
stream are thinking, in delta.reasoning (or delta.reasoning_content with
--reasoning-field reasoning_content), and of a Responses stream
response.reasoning_text.delta events; then comes the answer. They count within
max_tokens and in the usage's reasoning_tokens.

The ground truth (X-Latscope-Truth: 1) reports cached tokens, when the headers
went out, the prefill steps on the wall clock, and the frames Nagle held.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			prof, err := sim.ProfileByName(profile)
			if err != nil {
				return err
			}
			if modes.Reasoning.Field, err = sim.ParseReasoningField(reasoningField); err != nil {
				return fmt.Errorf("--reasoning-field: %w", err)
			}
			if modes.Headers, err = sim.ParseHeaderTiming(headers); err != nil {
				return fmt.Errorf("--headers: %w", err)
			}
			f, err := sim.ParseFault(fault)
			if err != nil {
				return fmt.Errorf("--fault: %w", err)
			}
			if f.IsZero() && cmd.Flags().Changed("fault-rate") {
				return errors.New("--fault-rate needs --fault")
			}
			if f.IsZero() {
				faultRate = 0
			} else if faultRate == 0 {
				return errors.New("--fault-rate 0 applies the fault to no request; drop --fault instead")
			}
			if err := deploy.Network.Validate(); err != nil {
				return fmt.Errorf("--rtt, --jitter: %w", err)
			}
			deploy.Network.Seed = seed
			deployment := deploy.Describe()
			if !deploy.NoProxy && (modes.CloseAfterStream || modes.Nagle) {
				// Both live in the server's own connection to its client.
				deploy.NoProxy = true
				deployment = deploy.Describe() + "; no proxy in front: --close-after-stream and --nagle act on the client's connection"
			}
			cfg := modes
			cfg.Profile = prof
			cfg.MaxNumSeqs = maxSeqs
			cfg.MaxBatchedTokens = maxBatched
			cfg.TokenizerPool = tokPool
			cfg.Model = model
			cfg.Fault = f
			cfg.FaultRate = faultRate
			cfg.OTLPEndpoint = otlp
			cfg.Seed = seed
			cfg.ServerTiming = !noServerTiming
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("sim: %w", err)
			}
			srv, err := sim.New(cfg)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				_ = srv.Close()
				return fmt.Errorf("listen on %s: %w", listen, err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "latscope sim: simulated %s server on http://%s (not a real model); %s\n", prof.Name, ln.Addr(), deployment)
			serveErr := deploy.Serve(cmd.Context(), srv, ln)
			closeErr := srv.Close()
			return errors.Join(serveErr, closeErr)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&listen, "listen", "127.0.0.1:8000", "address to listen on")
	fl.StringVar(&profile, "profile", "h100-7b", "cost profile: "+strings.Join(sim.ProfileNames(), ", "))
	fl.StringVar(&model, "model", sim.DefaultModel, "served model name")
	fl.IntVar(&maxSeqs, "max-num-seqs", 0, "batch slots (0: the profile's)")
	fl.IntVar(&maxBatched, "max-num-batched-tokens", 0, "token budget per engine step, for chunked prefill (0: the profile's)")
	fl.IntVar(&tokPool, "tokenizer-pool", 0, "tokenizer workers; 0 tokenizes on the shared loop, stalling every stream")
	fl.StringVar(&fault, "fault", "", "fault spec applied to --fault-rate of requests, e.g. stall=200,reset-after=5")
	fl.Float64Var(&faultRate, "fault-rate", 1, "fraction of requests that get --fault")
	fl.StringVar(&otlp, "otlp-traces-endpoint", "", "send one llm_request span per request to this OTLP/HTTP URL, e.g. http://127.0.0.1:4318/v1/traces")
	fl.Int64Var(&seed, "seed", 1, "seed for the generated text, EOS points and fault draws")
	fl.StringVar(&headers, "headers", string(sim.HeadersAtOnce), "when a stream's headers are sent: at-once (vLLM), slotted (llama-server) or first-token (llm-d sim)")
	fl.BoolVar(&modes.CloseAfterStream, "close-after-stream", false, "leave a connection dead after a streamed response, without Connection: close (llama-server)")
	fl.IntVar(&modes.PrefixCacheBlocks, "prefix-cache-blocks", 0, "cross-request prefix cache of this many 16-token blocks, LRU (0: off)")
	fl.BoolVar(&modes.KeepAbandoned, "keep-abandoned", false, "keep generating for clients that went away instead of aborting")
	fl.BoolVar(&modes.NoChunkedPrefill, "no-chunked-prefill", false, "prefill each prompt whole in a step that decoding streams wait for")
	fl.DurationVar(&modes.Loading, "loading", 0, "answer 503 \"Loading model\" for this long after start (0: ready at once)")
	fl.IntVar(&modes.Reasoning.Tokens, "reasoning-tokens", 0, "a reasoning model: the first N deltas of a chat or Responses stream are thinking (0: none)")
	fl.StringVar(&reasoningField, "reasoning-field", sim.ReasoningField, "the chat delta field the thinking streams in: reasoning (newer vLLM) or reasoning_content (older vLLM, SGLang, DeepSeek, llama.cpp)")
	fl.BoolVar(&modes.Nagle, "nagle", false, "Nagle's algorithm on, SSE events in two writes, delayed-ACK stalls emulated")
	registerDeployFlags(fl, &deploy)
	fl.BoolVar(&noServerTiming, "no-server-timing", false, "report no stage in Server-Timing (as vLLM): only the proxy's, and the metrics, say where the time went")
	return cmd
}

// registerDeployFlags adds the simulated deployment's flags (sim, demo).
func registerDeployFlags(fl *pflag.FlagSet, d *sim.Deployment) {
	fl.BoolVar(&d.NoProxy, "no-proxy", false, "no proxy hop in front of the simulated server")
	fl.DurationVar(&d.Network.RTT, "rtt", sim.DefaultRTT, "emulated network round trip to the clients, half each way (0: none)")
	fl.DurationVar(&d.Network.Jitter, "jitter", 0, "emulated jitter on each one-way trip, uniform within ±this")
}
