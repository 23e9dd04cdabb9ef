package aggregate

import (
	"fmt"

	"github.com/latscope/latscope/event"
)

// Insight thresholds for the causes of pauses the streams shared and for
// Nagle's signature.
const (
	// "N shared pauses were prefill interference (...)": at least this many
	// stall markers with one cause.
	stallCauseMin = 2
	// "N% of requests show Nagle's signature": at least this share of the
	// successful requests flagged nagle_suspect.
	nagleShareMin = 0.25
)

// stallTally sums the stall markers of each cause.
type stallTally map[event.StallCause]*causeTally

type causeTally struct {
	markers, pauses int64
	pausedMS        float64 // the streams' shared pause, summed
	longestMS       float64 // the longest gap any stream had
}

func (t *stallTally) add(m *event.Marker) {
	if m.Kind != event.MarkerStall || m.Cause == "" {
		return
	}
	if *t == nil {
		*t = stallTally{}
	}
	c := (*t)[m.Cause]
	if c == nil {
		c = &causeTally{}
		(*t)[m.Cause] = c
	}
	c.markers++
	c.pauses += int64(max(m.Values["pauses"], 1))
	c.pausedMS += m.Values["gap_ms"]
	c.longestMS = max(c.longestMS, m.Values["longest_gap_ms"])
}

// stallAdvice is what a cause's insight says and what to do about it.
var stallAdvice = []struct {
	cause event.StallCause
	what  string
	todo  string
}{
	{event.StallPrefillInterference, "prefill interference: the decoding streams waited while another request's prompt was prefilled",
		"chunk long prompts with chunked prefill and a smaller per-step token budget (vLLM --max-num-batched-tokens), or prefill on other instances (disaggregated prefill)"},
	{event.StallFrontEndBlock, "a front-end block: tokenization or the server's event loop held every stream's frames",
		"tokenize off the event loop (a tokenizer pool) or run more API server processes (vLLM --api-server-count)"},
	{event.StallProbeStarved, "latscope's own: its goroutines ran late, so these are not the server's pauses",
		"give latscope more CPU, or run it on a machine of its own"},
	{event.StallUnexplained, "unexplained: nothing latscope saw shows their cause",
		"per-request server timings (--otlp-listen for the server's spans) can show what ran in them"},
}

// stallInsights says, for each cause the stall markers name often enough,
// how often the streams paused for it and what to do about it.
func (a *Aggregator) stallInsights(_ *Snapshot, add addInsight) {
	for _, adv := range stallAdvice {
		c := a.stalls[adv.cause]
		if c == nil || c.markers < stallCauseMin {
			continue
		}
		add(fmt.Sprintf("%d shared pause(s) of the streams were %s (%.0f ms in all, longest gap %.1f ms): %s",
			c.pauses, adv.what, c.pausedMS, c.longestMS, adv.todo),
			map[string]float64{
				"pauses": float64(c.pauses), "markers": float64(c.markers),
				"paused_ms": c.pausedMS, "longest_gap_ms": c.longestMS,
			})
	}
}

// nagleInsight says how many requests show Nagle's signature on their
// connection (event.FlagNagleSuspect).
func (a *Aggregator) nagleInsight(s *Snapshot, add addInsight) {
	share, n, ok, enough := flagShare(s, event.FlagNagleSuspect, nagleShareMin)
	if !enough {
		return
	}
	add(fmt.Sprintf("%s of requests show Nagle's signature on their connection (frames held about 40 ms and released together, again and again): the server's socket has Nagle's algorithm on against the client's delayed ACKs; set TCP_NODELAY on it",
		pct(share)),
		map[string]float64{"share": share, "requests": float64(n), "ok": float64(ok)})
}
