package aggregate

// MetricDefinitions says what each latency statistic measures, as run's
// and demo's --help print it (and the README): tools disagree on
// these, so latscope states its own.
const MetricDefinitions = `Definitions (all client-side, monotonic clock):
  TTFT  intended send time -> first chunk that carries content. A role-only or
        empty first chunk (vLLM with chunked prefill) is recorded as its own
        event, not as the first token.
  ITL   gap between consecutive content chunks; a chunk carrying 3 tokens is
        one gap, not three (the tokens it carried are recorded beside it).
  TPOT  (E2E - TTFT) / (output tokens - 1).
  E2E   intended send time -> end of stream.
In open loop the intended send time is the schedule, so a late probe cannot
hide queueing (no coordinated omission).`
