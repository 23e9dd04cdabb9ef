package main

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/spf13/cobra"

	"github.com/latscope/latscope/sim"
)

// newSimCmd runs the built-in simulated LLM server.
func newSimCmd() *cobra.Command {
	var (
		listen, profile, model, fault, otlp string
		maxSeqs, maxBatched, tokPool        int
		faultRate                           float64
		seed                                int64
	)
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run the built-in simulated LLM server",
		Long: `sim serves an OpenAI-compatible API (/v1/chat/completions, /v1/completions,
/tokenize, /v1/models, /health) and vLLM-named Prometheus metrics on /metrics,
from a simulated serving stack: a shared front-end loop, a continuous-batching
scheduler with chunked prefill, and an engine whose steps slow down as the
batch grows. No model runs; the text is filler.

Faults (--fault, or per request with the X-Latscope-Fault header) are a
comma-separated list of: status=429|500|503, reset-after=N, malformed-after=N,
stall=MS, slow-headers=MS, oversized, split-utf8.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			prof, err := sim.ProfileByName(profile)
			if err != nil {
				return err
			}
			if maxSeqs < 0 || maxBatched < 0 || tokPool < 0 {
				return errors.New("--max-num-seqs, --max-num-batched-tokens and --tokenizer-pool must not be negative")
			}
			if faultRate < 0 || faultRate > 1 {
				return fmt.Errorf("--fault-rate %v: want a fraction between 0 and 1", faultRate)
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
			srv, err := sim.New(sim.Config{
				Profile:          prof,
				MaxNumSeqs:       maxSeqs,
				MaxBatchedTokens: maxBatched,
				TokenizerPool:    tokPool,
				Model:            model,
				Fault:            f,
				FaultRate:        faultRate,
				OTLPEndpoint:     otlp,
				Seed:             seed,
			})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				_ = srv.Close()
				return fmt.Errorf("listen on %s: %w", listen, err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "latscope sim: simulated %s server on http://%s (not a real model)\n", prof.Name, ln.Addr())
			serveErr := srv.Serve(cmd.Context(), ln)
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
	return cmd
}
