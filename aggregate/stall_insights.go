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

// stallTally sums the stall markers of each cause: the one source of
// every "N shared pauses (X ms in all)" any surface states.
type stallTally map[event.StallCause]*StallTotal

// StallTotal is the whole run's stall markers of one cause.
type StallTotal struct {
	Markers int64 `json:"markers"`
	// Pauses counts the shared pauses the markers hold (a marker of a run
	// of pauses holds several), PausedMS their shared time summed.
	Pauses   int64   `json:"pauses"`
	PausedMS float64 `json:"paused_ms"`
	// LongestGapMS is the longest gap any stream had in them.
	LongestGapMS float64 `json:"longest_gap_ms"`
}

// Text says the total as every surface does: "26 shared pauses (15 ms
// in all, longest gap 40.1 ms)", with the stall markers they came in when
// those are fewer (a marker of a run of pauses holds several), so the
// figure ties to the markers' count.
func (t StallTotal) Text() string {
	in := ""
	if t.Markers != t.Pauses {
		in = " in " + count(t.Markers, "stall marker", "stall markers")
	}
	return fmt.Sprintf("%s%s (%.0f ms in all, longest gap %.1f ms)", count(t.Pauses, "shared pause", "shared pauses"), in, t.PausedMS, t.LongestGapMS)
}

// were is the verb that follows Text: "was" after one pause.
func (t StallTotal) were() string {
	if t.Pauses == 1 {
		return "was"
	}
	return "were"
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
		c = &StallTotal{}
		(*t)[m.Cause] = c
	}
	c.Markers++
	c.Pauses += int64(max(m.Values["pauses"], 1))
	// A bad figure (NaN, negative) adds nothing rather than spoil the sum.
	if g := m.Values["gap_ms"]; g > 0 {
		c.PausedMS += g
	}
	if g := m.Values["longest_gap_ms"]; g > c.LongestGapMS {
		c.LongestGapMS = g
	}
}

// totals copies the tally for a snapshot.
func (t stallTally) totals() map[event.StallCause]StallTotal {
	if len(t) == 0 {
		return nil
	}
	out := make(map[event.StallCause]StallTotal, len(t))
	for k, v := range t {
		out[k] = *v
	}
	return out
}

// stallAdvice is what a cause's insight says and what to do about it. A
// server's own flag is named only where that server was detected (its
// design, serverDesigns, has one); any other server gets the advice alone.
var stallAdvice = []struct {
	cause event.StallCause
	what  string
	todo  string
	flag  func(serverDesign) string
}{
	{event.StallPrefillInterference, "prefill interference: the decoding streams waited while another request's prompt was prefilled",
		"chunk long prompts with chunked prefill and a smaller per-step token budget, or prefill on other instances (disaggregated prefill)",
		func(d serverDesign) string { return d.prefillFlag }},
	{event.StallFrontEndBlock, "a front-end block: tokenization or the server's event loop held every stream's frames",
		"tokenize off the event loop (a tokenizer pool) or run more API server processes",
		func(d serverDesign) string { return d.frontEndFlag }},
	{event.StallProbeStarved, "latscope's own: its goroutines ran late, so these are not the server's pauses",
		"give latscope more CPU, or run it on a machine of its own", nil},
	{event.StallClientHost, "the client host's: other processes kept the CPUs of the machine latscope runs on busy (PSI cpu pressure or steal), so these are not the server's pauses",
		"run latscope on a quieter machine, or give it CPUs of its own (taskset, a container's CPU reservation)", nil},
	{event.StallUnexplained, "unexplained: nothing latscope saw shows their cause",
		"per-request server timings (--otlp-listen for the server's spans) can show what ran in them", nil},
}

// stallInsights says, for each cause the stall markers name often enough,
// how often the streams paused for it and what to do about it.
func (a *Aggregator) stallInsights(s *Snapshot, add addInsight) {
	var design serverDesign
	if s.Session != nil {
		design = designOf(s.Session.Server)
	}
	for _, adv := range stallAdvice {
		c, ok := s.Markers.Stalls[adv.cause]
		if !ok || c.Markers < stallCauseMin {
			continue
		}
		todo := adv.todo
		if adv.flag != nil {
			if f := adv.flag(design); f != "" {
				todo += " (" + f + ")"
			}
		}
		add(fmt.Sprintf("the streams' %s %s %s: %s", c.Text(), c.were(), adv.what, todo),
			map[string]float64{
				"pauses": float64(c.Pauses), "markers": float64(c.Markers),
				"paused_ms": c.PausedMS, "longest_gap_ms": c.LongestGapMS,
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
