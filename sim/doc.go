// Package sim is latscope's simulated LLM server: an OpenAI-compatible HTTP
// server shaped like a real serving stack (vLLM V1), used by `latscope demo`
// and as the oracle of latscope's tests.
//
// It is built from the parts of a real stack, one file each:
//   - handlers.go and api.go: the HTTP front end (parsing, validation, errors);
//   - loop.go: the shared front-end event loop that parses every request,
//     tokenizes it (unless Config.TokenizerPool is set), and detokenizes and
//     frames every stream, so one long prompt stalls every other stream, as in
//     Python stacks that tokenize on the asyncio loop;
//   - tokenizer.go: the deterministic token model, shared with /tokenize;
//   - scheduler.go and engine.go: continuous batching with chunked prefill and
//     a step loop whose cost grows with the batch;
//   - stream.go: SSE framing and the non-streaming response;
//   - metrics.go and tracing.go: vLLM-named Prometheus metrics and OTLP spans;
//   - faults.go: injected failures;
//   - prefixcache.go: the cross-request prefix cache (Config.PrefixCacheBlocks);
//   - conn.go: connection-level behaviour (Config.CloseAfterStream,
//     Config.Nagle), which needs Serve;
//   - truth.go: the true duration of every stage of every request.
//
// By default it behaves like vLLM; the mode fields of Config make it behave
// like other servers (llama-server, llm-d's simulator, servers without
// chunked prefill or that finish abandoned requests) where latscope must
// cope with them.
//
// Costs are simulated with sleeps and short spins (see pause.go), but every
// duration the server reports is measured around what actually happened, so
// the truth stays true on a loaded machine.
package sim
