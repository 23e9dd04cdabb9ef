package report

import (
	"fmt"
	"strconv"
	"time"

	"github.com/latscope/latscope/aggregate"
)

// trafficTables are a watch's sections (latscope watch, agent --watch):
// the server's own traffic from its histograms (rates and gauges, where
// the time went, quantiles estimated from the buckets) and, with
// --otlp-listen, the users' requests from the server's spans.
func trafficTables(t *aggregate.Traffic) []table {
	if !t.Seen {
		out := []table{{Title: "Your users' traffic (the server's metrics)", Notes: []string{"No interval of the server's metrics was read."}}}
		return append(out, userSpanTables(t.Spans)...)
	}
	rates := table{
		Title:   fmt.Sprintf("Your users' traffic (server-reported, the server's %s metrics, over %s)", orDash(t.Dialect), t.Span.Round(time.Second)),
		Columns: []string{"requests", "req/s", "prompt tok/s", "output tok/s", "queue depth", "KV cache", "preemptions", "prefix-cache hits"},
		Rows: [][]string{{when(t.HasRequests, num(t.Requests, 0)), when(t.HasRequests, num(t.ReqPerSec, 2)), when(t.HasTokens, num(t.PromptTokPerSec, 1)), when(t.HasTokens, num(t.GenTokPerSec, 1)),
			when(t.HasQueueDepth, num(t.QueueDepth, 2)), when(t.HasKVCache, num(100*t.KVCache, 1)+"%"), when(t.HasPreemptions, num(t.Preemptions, 0)),
			when(t.PrefixFrom != "", num(100*t.PrefixHitRate, 1)+"% ("+t.PrefixFrom+")")}},
		Notes: []string{"The server's histograms count every request it finished: a canary's are in them too. A figure the server does not give is '-'."},
	}
	out := []table{rates}
	if len(t.Phases) > 0 {
		of := "end-to-end"
		if t.ShareOf != "e2e" {
			of = "the phases' sum (the server has no end-to-end histogram)"
		}
		ph := table{Title: "Where your users' time went (share of " + of + ", from the histograms' sums)", Columns: []string{"phase", "share", "mean (ms)", "per"}}
		for _, p := range t.Phases {
			per := "request"
			if p.PerToken {
				per = "token"
			}
			ph.Rows = append(ph.Rows, []string{p.Name, num(100*p.Share, 1) + "%", durMS(p.Mean), per})
		}
		out = append(out, ph)
	}
	if len(t.Quantiles) > 0 {
		q := table{
			Title:   "Your users' quantiles (bucket estimates)",
			Columns: []string{"metric", "count", "mean (ms)", "p50", "p90", "p99"},
			Text:    true,
			Notes: []string{"Each quantile is estimated from the histogram's buckets: interpolated within the bucket that holds it, " +
				"whose bounds are in brackets (the true value lies between them: that is the estimate's resolution); '>' past the last bound."},
		}
		for _, name := range []string{"ttft", "itl", "e2e", "queue", "prefill", "decode"} {
			if b, ok := t.Quantiles[name]; ok {
				q.Rows = append(q.Rows, []string{name, num(b.Count, 0), durMS(b.Mean), aggregate.EstimateText(b.P50),
					aggregate.EstimateText(b.P90), aggregate.EstimateText(b.P99)})
			}
		}
		out = append(out, q)
	}
	return append(out, userSpanTables(t.Spans)...)
}

// userSpanTables are the users' requests as the server's spans give them.
func userSpanTables(u *aggregate.UserSpans) []table {
	if u == nil {
		return nil
	}
	t := table{
		Title:   fmt.Sprintf("Your users' requests from the server's spans (%s; ms)", counted(u.Requests, "request", "requests")),
		Columns: append([]string{"metric"}, statColumns...),
		Notes: []string{"Server-reported, each request's own times (exact, not bucket estimates); never the canary's requests.",
			"Where the time went: " + aggregate.UserSpanShares(u) + "."},
	}
	for _, m := range aggregate.UserSpanStats(u) {
		if m.Stats.Count > 0 {
			t.Rows = append(t.Rows, append([]string{m.Name}, statCells(m.Stats)...))
		}
	}
	return []table{t}
}

// when is s when ok, else "-".
func when(ok bool, s string) string {
	if !ok {
		return "-"
	}
	return s
}

// durMS is d in milliseconds, 2 decimals.
func durMS(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64)
}
