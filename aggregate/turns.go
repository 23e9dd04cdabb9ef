package aggregate

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/latscope/latscope/event"
)

// Conversations and prefix caches: a chat's later turns carry the whole
// conversation so far, and a server with a prefix cache computes only what
// it has not seen. The successful requests are filed by their turn's index
// (--conversation) and by the share of their prompt the server said it
// took from its cache, so a cache that stops hitting (eviction, a router
// that lost a session's affinity) shows as TTFT rising with the turn and
// the cached share falling. Only the whole run is kept.

// maxTurnRows bounds the rows by turn: the last holds every later turn.
const maxTurnRows = 32

// shareEdges are the upper bounds of the cached-share rows (percent): 0,
// up to 25, 50, 75 and 100.
var shareEdges = [...]float64{0, 25, 50, 75, 100}

// TurnRow is the statistics of one row of a Turns table.
type TurnRow struct {
	Label string `json:"label"` // "1", "2", ..., "32+"; or "0%", "1-25%", ...
	Count int64  `json:"count"`
	TTFT  Stats  `json:"ttft"`
	// PromptTokens and CachedTokens are the means over the row's requests:
	// the prompt's length and the part the server reported from its
	// prefix cache (0 where it said nothing).
	PromptTokens float64 `json:"prompt_tokens_mean"`
	CachedTokens float64 `json:"cached_tokens_mean"`
	// CachedShare is the row's cached tokens over its prompt tokens (0..1).
	CachedShare float64 `json:"cached_share"`
	// TTFTPerUncached is the row's TTFT over its uncached prompt tokens (ms
	// per token, ratio of sums): flat across turns while the cache hits.
	TTFTPerUncached float64 `json:"ttft_per_uncached_token_ms"`
	// PrefillPerUncached is the server's prefill over the uncached tokens
	// (ms per token) of the requests whose prefill is known; absent when
	// none.
	PrefillPerUncached *float64 `json:"prefill_per_uncached_token_ms,omitempty"`
}

// Turns is the run's successful requests by conversation turn and by
// cached share.
type Turns struct {
	ByTurn        []TurnRow `json:"by_turn,omitempty"`
	ByCachedShare []TurnRow `json:"by_cached_share"`
	// CacheReported counts the requests whose server reported cached
	// tokens: none, and every request shows 0% (a server that never says
	// cannot be told from a cache that never hits).
	CacheReported int64 `json:"cache_reported"`
	// HitRate is the run's cached tokens over its prompt tokens, as the
	// server reported them per request (0..1); ServerHitRate the server's
	// prefix-cache counters' hits over queries, absent without them.
	HitRate       float64  `json:"hit_rate"`
	ServerHitRate *float64 `json:"server_hit_rate,omitempty"`
	// Series is the prefix cache over time (see CachePoint).
	Series []CachePoint `json:"series,omitempty"`
}

// turnCell holds one row's values.
type turnCell struct {
	n                        int64
	ttft                     tally
	h                        *hdr.Histogram
	prompt, cached, uncached int64
	ttftUs                   int64
	prefillUs, prefillUncach int64
}

// turnFiles files the successful requests by turn and by cached share.
type turnFiles struct {
	byTurn   [maxTurnRows]*turnCell
	byShare  [len(shareEdges)]*turnCell
	reported int64
	any      bool // a request with a turn or cached tokens came
	// prompt and cached are the run's sums; series the cache over time.
	prompt, cached int64
	series         cacheSeries
}

// addCache files a successful request by turn and cached share, in the
// cache's series and in its window slots.
func (a *Aggregator) addCache(r *event.Request, end time.Time) {
	prompt, cached := a.turns.add(r, end)
	for _, s := range []*counts{a.fineCounts.slot(end), a.coarseCounts.slot(end)} {
		if s != nil {
			s.prompt += int64(prompt)
			s.cached += int64(cached)
		}
	}
}

// add files r and returns its prompt and cached tokens.
func (f *turnFiles) add(r *event.Request, end time.Time) (prompt, cached int) {
	prompt = max(r.PromptTokens, 0)
	if r.Server != nil {
		cached = min(max(r.Server.CachedTokens, 0), prompt)
	}
	f.prompt += int64(prompt)
	f.cached += int64(cached)
	f.series.addRequest(end, prompt, cached, r.TTFT)
	if cached > 0 {
		f.reported++
	}
	if r.Turn <= 0 && cached == 0 && !f.any {
		return prompt, cached
	}
	f.any = true
	prefill := prefillOf(r)
	if r.Turn > 0 {
		k := min(r.Turn, maxTurnRows) - 1
		cellAt(&f.byTurn[k]).add(r, cached, prefill)
	}
	cellAt(&f.byShare[shareRow(cached, r.PromptTokens)]).add(r, cached, prefill)
	return prompt, cached
}

func cellAt(c **turnCell) *turnCell {
	if *c == nil {
		*c = &turnCell{}
	}
	return *c
}

// shareRow is the cached-share row of cached of prompt tokens.
func shareRow(cached, prompt int) int {
	if cached <= 0 || prompt <= 0 {
		return 0
	}
	pct := 100 * float64(cached) / float64(prompt)
	for k, edge := range shareEdges {
		if pct <= edge {
			return k
		}
	}
	return len(shareEdges) - 1
}

// prefillOf is the request's prefill as the server reported it (the
// breakdown's, else the server's own), or -1.
func prefillOf(r *event.Request) time.Duration {
	for _, st := range r.Breakdown {
		if st.Stage == event.StagePrefill && st.Provenance == event.ServerReported {
			return st.Duration
		}
	}
	if r.Server != nil {
		if d, ok := r.Server.Stages[event.StagePrefill]; ok {
			return d
		}
	}
	return -1
}

func (c *turnCell) add(r *event.Request, cached int, prefill time.Duration) {
	c.n++
	prompt := max(r.PromptTokens, 0)
	uncached := int64(max(prompt-cached, 0))
	c.prompt += int64(prompt)
	c.cached += int64(cached)
	c.uncached += uncached
	if us, _ := clamp(int64(r.TTFT / time.Microsecond)); us > 0 {
		if c.h == nil {
			c.h = hdr.New(histLowest, histHighest, slotDigits)
		}
		c.ttft.add(us)
		_ = c.h.RecordValue(us)
		c.ttftUs += us
	}
	if prefill >= 0 {
		p, _ := clamp(int64(prefill / time.Microsecond))
		c.prefillUs += p
		c.prefillUncach += uncached
	}
}

func (c *turnCell) row(label string) TurnRow {
	row := TurnRow{Label: label, Count: c.n}
	if c.ttft.n > 0 {
		row.TTFT = finishStats(c.ttft, c.h.ValueAtPercentilesSlice(statsPercentiles[:]))
	}
	if c.n > 0 {
		row.PromptTokens = float64(c.prompt) / float64(c.n)
		row.CachedTokens = float64(c.cached) / float64(c.n)
	}
	if c.prompt > 0 {
		row.CachedShare = float64(c.cached) / float64(c.prompt)
	}
	if c.uncached > 0 {
		row.TTFTPerUncached = float64(c.ttftUs) / 1000 / float64(c.uncached)
	}
	if c.prefillUncach > 0 {
		v := float64(c.prefillUs) / 1000 / float64(c.prefillUncach)
		row.PrefillPerUncached = &v
	}
	return row
}

// summary works out the rows (nil when no request had a turn or a cache
// hit).
func (f *turnFiles) summary() *Turns {
	if !f.any {
		return nil
	}
	out := &Turns{CacheReported: f.reported, Series: f.series.points()}
	if f.prompt > 0 {
		out.HitRate = float64(f.cached) / float64(f.prompt)
	}
	var q, h float64
	for _, b := range f.series.buckets {
		q, h = q+b.serverQ, h+b.serverH
	}
	if q > 0 {
		out.ServerHitRate = fptr(min(h/q, 1))
	}
	for k, c := range f.byTurn {
		if c == nil {
			continue
		}
		label := strconv.Itoa(k + 1)
		if k == maxTurnRows-1 {
			label += "+"
		}
		out.ByTurn = append(out.ByTurn, c.row(label))
	}
	for k, c := range f.byShare {
		if c != nil {
			out.ByCachedShare = append(out.ByCachedShare, c.row(shareLabel(k)))
		}
	}
	return out
}

// shareLabel names cached-share row k.
func shareLabel(k int) string {
	if k == 0 {
		return "0%"
	}
	return fmt.Sprintf(">%g-%g%%", shareEdges[k-1], shareEdges[k])
}

// writeTurns prints the tables by turn and by cached share.
func writeTurns(w *errWriter, t *Turns) {
	if t == nil {
		return
	}
	for _, part := range []struct {
		title, col string
		rows       []TurnRow
	}{
		{"By conversation turn (successful requests; ms)", "turn", t.ByTurn},
		{"By cached share of the prompt (as the server reported it; successful requests; ms)", "cached", t.ByCachedShare},
	} {
		if len(part.rows) == 0 {
			continue
		}
		w.printf("\n%s\n", part.title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "  %s\tcount\tprompt tok\tcached tok\tcached\tttft p50\tttft p99\tttft/uncached tok\tprefill/uncached tok\t\n", part.col)
		for _, r := range part.rows {
			prefill := "-"
			if r.PrefillPerUncached != nil {
				prefill = fmt.Sprintf("%.4f", *r.PrefillPerUncached)
			}
			fmt.Fprintf(tw, "  %s\t%d\t%.0f\t%.0f\t%.0f%%\t%.2f\t%.2f\t%.4f\t%s\t\n", r.Label, r.Count,
				r.PromptTokens, r.CachedTokens, 100*r.CachedShare, r.TTFT.P50, r.TTFT.P99, r.TTFTPerUncached, prefill)
		}
		_ = tw.Flush()
	}
	if t.CacheReported == 0 {
		w.printf("  (no request had cached tokens reported: a server that never says looks like a cache that never hits)\n")
	}
	writeCacheSeries(w, t)
}

// CacheRateLine says the run's prefix-cache hit rate, from the requests
// and from the server's counters.
func CacheRateLine(t *Turns) string {
	line := fmt.Sprintf("Prefix cache hit rate %.1f%% (cached over prompt tokens, as the server reported them per request)", 100*t.HitRate)
	if t.ServerHitRate != nil {
		line += fmt.Sprintf("; %.1f%% by the server's prefix-cache counters", 100**t.ServerHitRate)
	}
	return line
}

// FmtOpt prints an optional value with format f, "-" when absent; scale
// multiplies it first.
func FmtOpt(f string, v *float64, scale float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(f, *v*scale)
}

// writeCacheSeries prints the hit rate and the prefix cache over time.
func writeCacheSeries(w *errWriter, t *Turns) {
	w.printf("\n%s\n", CacheRateLine(t))
	if len(t.Series) == 0 {
		return
	}
	w.printf("\nPrefix cache over time (successful requests by their end; server counters by scrape)\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  from s\trequests\thit rate\tserver hit rate\tttft mean ms\tttft/uncached tok ms\t\n")
	for _, p := range t.Series {
		fmt.Fprintf(tw, "  %.0f\t%d\t%s\t%s\t%s\t%s\t\n", p.StartS, p.Requests, FmtOpt("%.1f%%", p.HitRate, 100),
			FmtOpt("%.1f%%", p.ServerHitRate, 100), FmtOpt("%.2f", p.TTFTMean, 1), FmtOpt("%.4f", p.TTFTPerUncached, 1))
	}
	_ = tw.Flush()
}

// TurnLines are the headless summary's lines on conversations: cached
// tokens and TTFT by turn, one line (empty without turns).
func TurnLines(t *Turns) []string {
	if t == nil || len(t.ByTurn) == 0 {
		return nil
	}
	line := "Turns (cached tok / ttft p50 ms):"
	for _, r := range t.ByTurn {
		line += fmt.Sprintf("  %s: %.0f / %.1f", r.Label, r.CachedTokens, r.TTFT.P50)
	}
	return []string{line}
}

// turnsInsight says, once a conversation has two turns, how the cached
// tokens and the TTFT went with the turn: the dashboard's markers panel
// shows it, as the reports do.
func turnsInsight(s *Snapshot, add addInsight) {
	t := s.Turns
	if t == nil || len(t.ByTurn) < 2 {
		return
	}
	rows := t.ByTurn[:min(len(t.ByTurn), 8)]
	var cached, ttft, per []string
	for _, r := range rows {
		cached = append(cached, fmt.Sprintf("%.0f", r.CachedTokens))
		ttft = append(ttft, fmt.Sprintf("%.0f", r.TTFT.P50))
		per = append(per, fmt.Sprintf("%.2f", r.TTFTPerUncached))
	}
	first, last := rows[0], rows[len(rows)-1]
	add(fmt.Sprintf("by conversation turn 1-%s: cached tokens %s; TTFT p50 %s ms; TTFT per uncached token %s ms (cached tokens as the server reported them)",
		last.Label, strings.Join(cached, "/"), strings.Join(ttft, "/"), strings.Join(per, "/")),
		map[string]float64{"turns": float64(len(t.ByTurn)), "cached_first": first.CachedTokens, "cached_last": last.CachedTokens,
			"ttft_p50_first_ms": first.TTFT.P50, "ttft_p50_last_ms": last.TTFT.P50})
}
