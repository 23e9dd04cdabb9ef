package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// requestList is the requests view's rows: the window's slowest, then the
// latest. A request in both lists shows in both.
type requestList struct {
	rows  []*event.Request
	nSlow int
	total int // rows before the filter
}

// listOf lists the window's slowest, then the latest, that pass f; agents
// names the agent of a request when several are attached.
func listOf(rs *aggregate.RequestSample, w aggregate.Window, f *requestFilter, agents *requestAgents) requestList {
	l := requestList{total: len(rs.Slowest[w]) + len(rs.Latest)}
	l.rows = make([]*event.Request, 0, l.total)
	for _, r := range rs.Slowest[w] {
		if f.keep(r, agents.of(r)) {
			l.rows = append(l.rows, r)
		}
	}
	l.nSlow = len(l.rows)
	for _, r := range rs.Latest {
		if f.keep(r, agents.of(r)) {
			l.rows = append(l.rows, r)
		}
	}
	return l
}

// index returns where the request with id is, preferring the section of
// the row at prefer, or -1.
func (l *requestList) index(id string, prefer int) int {
	found := -1
	for i, r := range l.rows {
		if r.ID != id {
			continue
		}
		if (i < l.nSlow) == (prefer < l.nSlow) {
			return i
		}
		if found < 0 {
			found = i
		}
	}
	return found
}

const reqHeader = "   id                end      ttft       e2e  tokens  outcome"

// requestsView is what the requests view shows besides the list: the
// filter, as applied or as being typed.
type requestsView struct {
	filter    *requestFilter
	typing    bool   // `/` was pressed: the filter line is being edited
	input     string // what has been typed
	filterErr string // why the typed filter was not applied
	lengths   *aggregate.ByLength
}

// renderRequests draws the requests view: the slowest of the window, then
// the latest, with the selected row marked, a filter line and where the
// list is scrolled to. rowAt gives, for each line, the list row it shows
// (-1 for none): what a click on it selects.
func renderRequests(st *styles, l *requestList, sel int, begin time.Time, w aggregate.Window, v requestsView, width, height int) (lines []string, rowAt []int) {
	lines = []string{
		rule(st, st.title.Render("requests")+" · "+w.String()+st.dim.Render("   enter or click open · / filter · esc back"), width),
		filterLine(st, l, v, width),
	}
	rowAt = []int{-1, -1}
	if line, ok := lengthsLine(st, v.lengths, width); ok {
		lines, rowAt = append(lines, line), append(rowAt, -1)
	}
	if len(l.rows) == 0 {
		msg := " no finished request yet"
		if l.total > 0 {
			msg = " no request passes the filter"
		}
		return append(lines, fit(st.dim.Render(msg), width)), append(rowAt, -1)
	}
	body := make([]string, 0, len(l.rows)+4)
	bodyRow := make([]int, 0, cap(body))
	label := func(text string) {
		body = append(body, fit(st.dim.Render(text), width), fit(st.dim.Render(reqHeader), width))
		bodyRow = append(bodyRow, -1, -1)
	}
	selLine := 0
	if l.nSlow > 0 {
		label(" slowest in " + w.String() + " (by TTFT)")
	}
	for i, r := range l.rows {
		if i == l.nSlow {
			label(" latest")
		}
		if i == sel {
			selLine = len(body)
		}
		body = append(body, requestLine(st, r, begin, i == sel, width))
		bodyRow = append(bodyRow, i)
	}
	// Scroll so the selected row stays in view.
	room := max(height-len(lines), 1)
	start := 0
	if selLine >= room {
		start = selLine - room + 1
	}
	end := min(len(body), start+room)
	// Where the view is: the rows it shows of how many.
	first, last := -1, -1
	for _, i := range bodyRow[start:end] {
		if i >= 0 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first >= 0 {
		pos := st.dim.Render(fmt.Sprintf("rows %d–%d of %d ", first+1, last+1, len(l.rows)))
		lines[1] = fit(ansi.Truncate(lines[1], width-visibleWidth(pos), ""), width-visibleWidth(pos)) + pos
	}
	return append(lines, body[start:end]...), append(rowAt, bodyRow[start:end]...)
}

// filterLine says what the filter keeps, or shows it being typed.
func filterLine(st *styles, l *requestList, v requestsView, width int) string {
	switch {
	case v.typing:
		line := " " + st.key.Render("/") + " " + v.input + st.key.Render("▏")
		if v.filterErr != "" { // the error first: the hint may not fit beside it
			line += "  " + st.bad.Render(v.filterErr)
		}
		return fit(line+st.dim.Render("   ok failed 429 nagle ttft>200 @agent prompt=513-1024 · enter apply · esc clear"), width)
	case v.filter != nil && v.filter.active():
		return fit(" "+st.key.Render("filter: "+v.filter.text)+st.dim.Render(fmt.Sprintf(" · %d of %d rows · / to change", len(l.rows), l.total)), width)
	}
	return fit(st.dim.Render(" / to filter by outcome, flag, minimum TTFT, agent or length"), width)
}

// lengthsLine names the run's length buckets of prompts and of outputs, with
// their successful requests, when either side has more than one: the
// buckets a filter such as prompt=513-1024 picks (aggregate files them).
func lengthsLine(st *styles, b *aggregate.ByLength, width int) (string, bool) {
	if b.Empty() || len(b.Prompt) < 2 && len(b.Output) < 2 {
		return "", false
	}
	var parts []string
	for _, side := range []struct {
		name    string
		buckets []aggregate.LengthBucket
	}{{"prompt", b.Prompt}, {"output", b.Output}} {
		if len(side.buckets) < 2 {
			continue
		}
		cells := make([]string, len(side.buckets))
		for i, bk := range side.buckets {
			cells[i] = fmt.Sprintf("%s ×%d", bk.Label(), bk.Count)
		}
		parts = append(parts, side.name+"="+strings.Join(cells, "  "))
	}
	return fit(st.dim.Render(" by length (tokens, ok requests of the run): "+strings.Join(parts, " · ")), width), true
}

func requestLine(st *styles, r *event.Request, begin time.Time, selected bool, width int) string {
	mark := "  "
	if selected {
		mark = st.key.Render("▸ ")
	}
	ttft := "-"
	if r.TTFT > 0 {
		ttft = msUnit(durMS(r.TTFT))
	}
	e2e := "-"
	if r.E2E > 0 {
		e2e = msUnit(durMS(r.E2E))
	}
	outcome := string(r.Outcome)
	switch {
	case r.Failed():
		outcome = st.bad.Render(failure(r))
	case !r.OK(): // cut short by the run's end: not a failure
		outcome = st.dim.Render(outcome)
	}
	switch {
	case r.HasFlag(event.FlagServerReported):
		outcome += st.dim.Render(" · user's, server span")
	case r.HasFlag(event.FlagCanary):
		outcome += st.dim.Render(" · canary")
	}
	line := fmt.Sprintf(" %s%-16s %8s %9s %9s %7d  %s", mark, fit(r.ID, 16), clock(r.EndedAt().Sub(begin)), ttft, e2e, r.OutputTokens, outcome)
	if selected {
		return st.selected.Render(fit(line, width))
	}
	return fit(line, width)
}

// failure says how a request failed: its outcome, status and error.
func failure(r *event.Request) string {
	parts := []string{string(r.Outcome)}
	if r.Status != 0 {
		parts = append(parts, fmt.Sprintf("HTTP %d", r.Status))
	}
	if r.Error != "" {
		parts = append(parts, "("+r.Error+")")
	}
	return strings.Join(parts, " ")
}

func durMS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
