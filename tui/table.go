package tui

import (
	"fmt"
	"maps"
	"strings"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// Stage table geometry: name, provenance, count, then five statistics.
const (
	tableNameW  = 18 // "server: loop_wait", a server's own stage, whole
	tableProvW  = 10
	tableCountW = 7
	tableStatW  = 7
	tableWidth  = 1 + tableNameW + tableProvW + tableCountW + 5*tableStatW
)

// tableRow is one line of the stage table.
type tableRow struct {
	name, prov string
	stats      aggregate.Stats
	metric     string // "ttft", ... for SLO breaches; empty for stages
}

func tableRows(s *aggregate.Snapshot, w aggregate.Window) []tableRow {
	win := &s.Windows[w]
	rows := []tableRow{{name: "ttft", prov: "measured", stats: win.TTFT, metric: "ttft"}}
	if s.Reasoning != nil {
		// A reasoning model: the objectives' ttft is the basis's.
		answer := tableRow{name: "ttft_answer", prov: "measured", stats: win.TTFTAnswer}
		if s.TTFTBasis != aggregate.BasisFirst {
			answer.metric, rows[0].metric = "ttft", ""
		}
		rows = append(rows, answer, tableRow{name: "thinking", prov: "measured", stats: win.Thinking},
			tableRow{name: "ttst", prov: "measured", stats: win.TTST})
	}
	rows = append(rows, []tableRow{
		{name: "itl", prov: "measured", stats: win.ITL, metric: "itl"},
		{name: "tpot", prov: "measured", stats: win.TPOT, metric: "tpot"},
		{name: "e2e", prov: "measured", stats: win.E2E, metric: "e2e"},
	}...)
	if len(win.Breakdown) > 0 {
		for _, st := range event.OrderStages(stageOrder, maps.Keys(win.Breakdown)) {
			prov := string(win.BreakdownProvenance[st].Main()) // the window's majority, or mixed
			if prov == "" {
				prov = provText(s.Breakdown.Stages[st].Provenance)
			}
			rows = append(rows, tableRow{name: string(st), prov: prov, stats: win.Breakdown[st]})
		}
		return rows
	}
	for _, st := range event.OrderStages(clientStageOrder, maps.Keys(win.Stages)) {
		rows = append(rows, tableRow{name: string(st), prov: "measured", stats: win.Stages[st]})
	}
	return rows
}

func provText(ps []event.Provenance) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = string(p)
		if len(ps) > 1 && p == event.Estimated {
			parts[i] = "est"
		}
	}
	if len(parts) == 0 {
		return "?"
	}
	return strings.Join(parts, "+")
}

var statNames = [5]string{"mean", "p50", "p90", "p99", "max"}

// renderTable draws the stage table in at most height lines; objectives
// broken over the window colour their cell (and carry "!" without colour).
func renderTable(st *styles, rows []tableRow, broken map[string]bool, w aggregate.Window, width, height int) []string {
	if height <= 0 {
		return nil
	}
	// The styled title is wider in bytes than in cells: pad it by cells.
	head := fit(" "+st.title.Render("stages")+st.dim.Render(" ("+w.String()+", ms)"), 1+tableNameW+tableProvW) + fmt.Sprintf("%*s", tableCountW, "count")
	for _, n := range statNames {
		head += fmt.Sprintf("%*s", tableStatW, n)
	}
	lines := []string{fit(st.dim.Render(head), width)}
	shown, hidden := fitRows(rows, height-1)
	for _, r := range shown {
		lines = append(lines, fit(tableLine(st, r, broken), width))
	}
	if hidden > 0 {
		lines = append(lines, fit(st.dim.Render(fmt.Sprintf(" +%d smaller stages (taller terminal to see them)", hidden)), width))
	}
	return lines
}

// fitRows keeps the rows that fit in n lines: the latency rows always, then
// the stages with the largest means, in their order; when any must go, one
// line says how many.
func fitRows(rows []tableRow, n int) ([]tableRow, int) {
	if len(rows) <= n {
		return rows, 0
	}
	n-- // the "+k smaller stages" line
	keep := make([]bool, len(rows))
	kept := 0
	for i, r := range rows {
		if r.metric != "" && kept < n {
			keep[i] = true
			kept++
		}
	}
	for kept < n {
		best := -1
		for i, r := range rows {
			if !keep[i] && (best < 0 || r.stats.Mean > rows[best].stats.Mean) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		keep[best] = true
		kept++
	}
	out := make([]tableRow, 0, kept)
	for i, r := range rows {
		if keep[i] {
			out = append(out, r)
		}
	}
	return out, len(rows) - len(out)
}

func tableLine(st *styles, r tableRow, broken map[string]bool) string {
	var b strings.Builder
	b.WriteString(" ")
	b.WriteString(fit(r.name, tableNameW))
	b.WriteString(st.dim.Render(fit(r.prov, tableProvW)))
	fmt.Fprintf(&b, "%*s", tableCountW, count(r.stats.Count))
	vals := [5]float64{r.stats.Mean, r.stats.P50, r.stats.P90, r.stats.P99, r.stats.Max}
	for i, v := range vals {
		cell := fmt.Sprintf("%*s", tableStatW, "-")
		if r.stats.Count > 0 {
			cell = fmt.Sprintf("%*s", tableStatW, ms(v))
		}
		if r.metric != "" && broken[r.metric+"."+statNames[i]] {
			if st.plain {
				cell = "!" + cell[1:]
			}
			cell = st.bad.Render(cell)
		}
		b.WriteString(cell)
	}
	return b.String()
}
