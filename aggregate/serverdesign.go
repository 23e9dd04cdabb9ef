package aggregate

import (
	"strings"

	"github.com/latscope/latscope/aggregate/internal/stall"
)

// serverDesign is what is known of how a kind of server (the session's
// detected server, event.Session.Server) works: which of the probe's
// signatures are evidence of a stall's cause on it, and which of its flags
// advice may name.
type serverDesign struct {
	kind string
	// batchesPrefill: it prefills new prompts in the engine steps that
	// decode the running streams (continuous batching).
	batchesPrefill bool
	// tokenizesOnLoop: it can tokenize on the loop that writes the
	// streams' frames.
	tokenizesOnLoop bool
	// prefillFlag and frontEndFlag are its own settings against prefill
	// interference and a blocked front end ("" when none is known).
	prefillFlag, frontEndFlag string
}

// serverDesigns lists the server kinds whose design is known. A kind not
// listed (a plain OpenAI-compatible server, a gateway, Anthropic, a server
// of unknown kind) takes only the server's own timing as evidence, and its
// advice names no server's flag.
var serverDesigns = []serverDesign{
	{kind: "vllm", batchesPrefill: true, tokenizesOnLoop: true,
		prefillFlag: "vLLM --max-num-batched-tokens", frontEndFlag: "vLLM --api-server-count"},
	// latscope's simulator works as vLLM does (its tokenizer on the loop
	// unless --tokenizer-pool), in each of its header timings.
	{kind: "latscope-sim", batchesPrefill: true, tokenizesOnLoop: true,
		prefillFlag: "latscope sim --max-num-batched-tokens", frontEndFlag: "latscope sim --tokenizer-pool"},
	{kind: "sglang", batchesPrefill: true, prefillFlag: "SGLang --chunked-prefill-size"},
	{kind: "tgi", batchesPrefill: true, prefillFlag: "TGI --max-batch-prefill-tokens"},
	{kind: "llamacpp", batchesPrefill: true},
}

// designOf is what is known of a server kind; a kind of unknown design
// keeps its name only.
func designOf(kind string) serverDesign {
	for _, d := range serverDesigns {
		if kind == d.kind || d.kind == "latscope-sim" && strings.HasPrefix(kind, "latscope-sim-") {
			d.kind = kind
			return d
		}
	}
	return serverDesign{kind: kind}
}

// stallServer is the design the stall detector takes evidence by.
func (d serverDesign) stallServer() stall.Server {
	return stall.Server{Kind: d.kind, BatchesPrefill: d.batchesPrefill, TokenizesOnLoop: d.tokenizesOnLoop}
}
