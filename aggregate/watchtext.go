package aggregate

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/latscope/latscope/event"
)

// WatchStatusLine is a watch session's status line: the last 10 s of the
// server's own traffic and, with a canary, the canary's figures beside it.
func WatchStatusLine(s Snapshot) string {
	w := s.Windows[Win10s]
	line := "watch 10s: " + trafficLine(w.Traffic)
	if u := w.Traffic.Spans; u != nil {
		line += " | users' spans: " + userSpanLine(u)
	}
	if s.Session != nil && s.Session.Load.Mode == event.LoadCanary {
		line += " | canary: " + canaryLine(w)
	}
	return line
}

// RequestRate is the server's finished requests per second, or says that
// its metrics do not count requests.
func RequestRate(t Traffic) string {
	if !t.HasRequests {
		return "req/s not reported"
	}
	return fmt.Sprintf("%.1f req/s", t.ReqPerSec)
}

func trafficLine(t Traffic) string {
	if !t.Seen {
		return "no metrics interval yet"
	}
	parts := []string{RequestRate(t)}
	if len(t.Phases) > 0 {
		parts = append(parts, PhaseShares(t))
	}
	if q, ok := t.Quantiles["ttft"]; ok && q.P50.OK {
		parts = append(parts, "TTFT p50 "+EstimateText(q.P50))
	}
	parts = append(parts, TrafficGauges(t))
	return strings.Join(parts, "  ")
}

func userSpanLine(u *UserSpans) string {
	line := fmt.Sprintf("%d", u.Requests)
	if u.TTFT.Count > 0 {
		line += fmt.Sprintf("  TTFT p50 %s p99 %s", msText(u.TTFT.P50), msText(u.TTFT.P99))
	}
	return line + "  " + UserSpanShares(u)
}

// UserSpanShares is "queue 40% prefill 5% decode 50% rest 5% of e2e" for
// the users' span records.
func UserSpanShares(u *UserSpans) string {
	if len(u.Shares) == 0 {
		return "no end-to-end time"
	}
	parts := make([]string, 0, len(u.Shares))
	for _, name := range []string{PhaseQueue, PhasePrefill, PhaseDecode, PhaseRest} {
		if v, ok := u.Shares[name]; ok {
			parts = append(parts, fmt.Sprintf("%s %.0f%%", name, 100*v))
		}
	}
	return strings.Join(parts, " ") + " of e2e"
}

// UserSpanStats are the users' span statistics by name, in order.
func UserSpanStats(u *UserSpans) []NamedStats {
	return []NamedStats{{"ttft", u.TTFT}, {"queue", u.Queue}, {"prefill", u.Prefill}, {"decode", u.Decode}, {"e2e", u.E2E}}
}

// NamedStats is one statistic and its name.
type NamedStats struct {
	Name  string
	Stats Stats
}

func canaryLine(w WindowStats) string {
	if w.TTFT.Count == 0 {
		return fmt.Sprintf("sent %d, no answer yet", w.Sent)
	}
	return fmt.Sprintf("%d ok  TTFT p50 %s p99 %s", w.OK, msText(w.TTFT.P50), msText(w.TTFT.P99))
}

// PhaseShares is "queue 55% prefill 3% decode 41% rest 1% of e2e".
func PhaseShares(t Traffic) string {
	parts := make([]string, 0, len(t.Phases)+1)
	for _, p := range t.Phases {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", p.Name, 100*p.Share))
	}
	of := "of e2e"
	if t.ShareOf != "e2e" {
		of = "of their sum"
	}
	return strings.Join(parts, " ") + " " + of
}

// TrafficGauges is "queue 3.2  KV 12% · preempted 0 · prefix hits 4%",
// each part only where the server gives it.
func TrafficGauges(t Traffic) string {
	var parts []string
	if t.HasQueueDepth {
		parts = append(parts, fmt.Sprintf("queue %.1f", t.QueueDepth))
	}
	if t.HasRunning {
		parts = append(parts, fmt.Sprintf("running %.1f", t.Running))
	}
	var kv []string
	if t.HasKVCache {
		kv = append(kv, fmt.Sprintf("KV %.0f%%", 100*t.KVCache))
	}
	if t.HasPreemptions {
		kv = append(kv, fmt.Sprintf("preempted %.0f", t.Preemptions))
	}
	if t.PrefixFrom != "" {
		kv = append(kv, fmt.Sprintf("prefix hits %.0f%%", 100*t.PrefixHitRate))
	}
	if len(kv) > 0 {
		parts = append(parts, strings.Join(kv, " · "))
	}
	return strings.Join(parts, "  ")
}

// EstimateText is a bucket estimate with its bucket: "≈180 ms (100–250)",
// or "> 2.5 s" past the last bound.
func EstimateText(e BucketEstimate) string {
	switch {
	case !e.OK:
		return "-"
	case e.Above:
		return "> " + durText(e.Lower)
	}
	return fmt.Sprintf("≈%s (%s–%s)", durText(e.Value), boundText(e.Lower), boundText(e.Upper))
}

// durText shows a duration in ms below 10 s, else in s.
func durText(d time.Duration) string {
	if d >= 10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return msText(float64(d) / float64(time.Millisecond))
}

// boundText shows a bucket bound as the server wrote it, in ms below 1 s.
func boundText(d time.Duration) string {
	if d >= time.Second {
		return fmt.Sprintf("%gs", d.Seconds())
	}
	return fmt.Sprintf("%gms", float64(d)/float64(time.Millisecond))
}

func msText(ms float64) string {
	switch {
	case ms >= 100:
		return fmt.Sprintf("%.0f ms", ms)
	case ms >= 10:
		return fmt.Sprintf("%.1f ms", ms)
	}
	return fmt.Sprintf("%.2f ms", ms)
}

// WriteWatchTable prints a watch session's summary: the server's own
// traffic over the whole session and, with a canary, the canary's figures.
func WriteWatchTable(w io.Writer, s Summary) error {
	var b strings.Builder
	if h := s.Session; h != nil {
		fmt.Fprintf(&b, "latscope watch: %s (server %s, metrics %s)\n", h.Target, h.Server, h.MetricsURL)
	}
	t := Traffic{}
	if s.Traffic != nil {
		t = *s.Traffic
	}
	writeTraffic(&b, t)
	writeUserSpans(&b, t.Spans)
	if s.Session != nil && s.Session.Load.Mode == event.LoadCanary {
		fmt.Fprintf(&b, "\nthe canary (latscope's own requests, %.2g/s; measured by the client):\n", s.Session.Load.Rate)
		fmt.Fprintf(&b, "  ok %d  errors %d\n", s.Requests.OK, s.Requests.Errors)
		for _, m := range []struct {
			name string
			st   Stats
		}{{"ttft", s.TTFT}, {"itl", s.ITL}, {"e2e", s.E2E}} {
			if m.st.Count > 0 {
				fmt.Fprintf(&b, "  %-5s n %-6d mean %-9s p50 %-9s p90 %-9s p99 %s\n", m.name, m.st.Count,
					msText(m.st.Mean), msText(m.st.P50), msText(m.st.P90), msText(m.st.P99))
			}
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write the watch summary: %w", err)
	}
	return nil
}

// writeUserSpans prints the users' requests as the server's spans give them.
func writeUserSpans(b *strings.Builder, u *UserSpans) {
	if u == nil {
		return
	}
	fmt.Fprintf(b, "\nyour users' requests, from the server's own spans (%d; the canary's are not among them; each request's server-reported times):\n", u.Requests)
	b.WriteString("  where the time went: " + UserSpanShares(u) + "\n")
	for _, m := range UserSpanStats(u) {
		if m.Stats.Count > 0 {
			fmt.Fprintf(b, "    %-8s n %-7d mean %-9s p50 %-9s p90 %-9s p99 %s\n", m.Name, m.Stats.Count,
				msText(m.Stats.Mean), msText(m.Stats.P50), msText(m.Stats.P90), msText(m.Stats.P99))
		}
	}
}

func writeTraffic(b *strings.Builder, t Traffic) {
	if !t.Seen {
		b.WriteString("no interval of the server's metrics was read: nothing to show\n")
		return
	}
	fmt.Fprintf(b, "all traffic, as the server's %s metrics report it, over %s (a canary's requests are in it too):\n", t.Dialect, t.Span.Round(time.Second))
	if t.HasRequests {
		fmt.Fprintf(b, "  requests %.0f (%.2f/s)", t.Requests, t.ReqPerSec)
	} else {
		b.WriteString("  requests not reported (no end-to-end or queue histogram)")
	}
	if t.HasTokens {
		fmt.Fprintf(b, "  prompt tokens %.0f/s  output tokens %.0f/s", t.PromptTokPerSec, t.GenTokPerSec)
	}
	b.WriteString("\n")
	if len(t.Phases) > 0 {
		of := "end-to-end"
		if t.ShareOf != "e2e" {
			of = "the phases' sum (no end-to-end histogram)"
		}
		per := "mean per request"
		if slices.ContainsFunc(t.Phases, func(p TrafficPhase) bool { return p.PerToken }) {
			per = "mean per token: the server times tokens, not requests"
		}
		fmt.Fprintf(b, "  where the time went (server-reported; share of %s, %s):\n", of, per)
		for _, p := range t.Phases {
			per := "request"
			if p.PerToken {
				per = "token"
			}
			fmt.Fprintf(b, "    %-8s %5.1f%%  %s per %s\n", p.Name, 100*p.Share, durText(p.Mean), per)
		}
	}
	if len(t.Quantiles) > 0 {
		b.WriteString("  quantiles (bucket estimates: the true value lies in the bucket in brackets):\n")
		for _, name := range trafficStages {
			q, ok := t.Quantiles[name]
			if !ok {
				continue
			}
			fmt.Fprintf(b, "    %-8s n %-7.0f mean %-9s p50 %-22s p90 %-22s p99 %s\n", name, q.Count, durText(q.Mean),
				EstimateText(q.P50), EstimateText(q.P90), EstimateText(q.P99))
		}
	}
	if g := TrafficGauges(t); g != "" {
		b.WriteString("  " + g + "\n")
	}
}
