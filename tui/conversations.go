package tui

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/latscope/latscope/aggregate"
)

// The conversations view (key c): TTFT by conversation turn and by cached
// share of the prompt, and the prefix cache's hit rate over time beside
// the TTFT, so a cache that starts evicting (or a router that loses a
// session's affinity) shows as the hit rate falling while TTFT rises.

// renderConversations draws the view in width × h.
func renderConversations(st *styles, s *aggregate.Snapshot, w aggregate.Window, width, h int) []string {
	win := &s.Windows[w]
	title := st.title.Render("conversations") + st.dim.Render(" · c or esc: back")
	lines := []string{rule(st, title, width)}
	t := s.Turns
	if t == nil {
		return append(lines, st.dim.Render("  no conversation turns or cached tokens yet"),
			st.dim.Render("  (--conversation turns=N; cached tokens come from the server)"))
	}
	rate := fmt.Sprintf("  prefix cache hit rate %s: %s", w, pct(win.CacheHitRate))
	if win.Traffic.PrefixFrom != "" {
		rate += fmt.Sprintf(" · server's %s %s", win.Traffic.PrefixFrom, pct(win.Traffic.PrefixHitRate))
	}
	rate += fmt.Sprintf(" · run %s", pct(t.HitRate))
	if t.ServerHitRate != nil {
		rate += fmt.Sprintf(" (server's %s)", pct(*t.ServerHitRate))
	}
	lines = append(lines, rate, st.dim.Render("  cached over prompt tokens as the server reported them per request; tables: whole run, successful requests"))
	if t.CacheReported == 0 {
		lines = append(lines, st.dim.Render("  no request had cached tokens reported: a server that never says looks like a cache that never hits"))
	}
	lines = append(lines, cacheSparks(st, t.Series, width)...)
	lines = append(lines, "")
	lines = append(lines, turnTable(st, "turn", t.ByTurn)...)
	lines = append(lines, turnTable(st, "cached", t.ByCachedShare)...)
	if len(lines) > h {
		lines = lines[:h]
	}
	return lines
}

// turnTable is one table of rows by turn or by cached share (whole run).
func turnTable(st *styles, col string, rows []aggregate.TurnRow) []string {
	if len(rows) == 0 {
		return nil
	}
	out := []string{st.bold.Render(fmt.Sprintf("  %-8s %7s %9s %9s %7s %9s %9s %12s", col, "count", "prompt", "cached", "share", "ttft p50", "ttft p99", "ms/uncached"))}
	for _, r := range rows {
		out = append(out, fmt.Sprintf("  %-8s %7s %9.0f %9.0f %7s %9s %9s %12.4f", r.Label, count(r.Count), r.PromptTokens, r.CachedTokens,
			pct(r.CachedShare), ms(r.TTFT.P50), ms(r.TTFT.P99), r.TTFTPerUncached))
	}
	return append(out, "")
}

// cacheSparks draws the hit rate (client's and server's) and the mean TTFT
// over the run's series, the newest that fit.
func cacheSparks(st *styles, pts []aggregate.CachePoint, width int) []string {
	if len(pts) == 0 {
		return nil
	}
	const label = 22
	n := min(len(pts), max(width-label-4, 1))
	pts = pts[len(pts)-n:]
	hit := make([]float64, n)
	server := make([]float64, n)
	ttft := make([]float64, n)
	top := 0.0
	for i, p := range pts {
		hit[i], server[i], ttft[i] = opt(p.HitRate), opt(p.ServerHitRate), opt(p.TTFTMean)
		if !math.IsNaN(ttft[i]) {
			top = max(top, ttft[i])
		}
	}
	every := fmt.Sprintf("%gs", pts[0].WidthS)
	out := []string{"", st.bold.Render(fmt.Sprintf("  over the run, one mark per %s, from %s:", every, elapsedShort(time.Duration(pts[0].StartS*float64(time.Second)))))}
	out = append(out, fmt.Sprintf("  %-*s %s", label, "hit rate (0-100%)", scaledSpark(hit, 1)))
	if anyValue(server) {
		out = append(out, fmt.Sprintf("  %-*s %s", label, "server hit rate", scaledSpark(server, 1)))
	}
	out = append(out, fmt.Sprintf("  %-*s %s", label, "ttft mean (0-"+ms(top)+" ms)", scaledSpark(ttft, top)))
	return out
}

func opt(v *float64) float64 {
	if v == nil {
		return math.NaN()
	}
	return *v
}

func anyValue(vs []float64) bool {
	for _, v := range vs {
		if !math.IsNaN(v) {
			return true
		}
	}
	return false
}

// scaledSpark draws vs from 0 to top, a blank where a value is missing.
func scaledSpark(vs []float64, top float64) string {
	var b strings.Builder
	for _, v := range vs {
		if math.IsNaN(v) || top <= 0 {
			b.WriteRune(' ')
			continue
		}
		k := int(math.Round(min(max(v/top, 0), 1) * float64(len(sparkRunes)-1)))
		b.WriteRune(sparkRunes[k])
	}
	return b.String()
}
