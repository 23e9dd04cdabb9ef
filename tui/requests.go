package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// requestList is the requests view's rows: the window's slowest, then the
// latest. A request in both lists shows in both.
type requestList struct {
	rows  []*event.Request
	nSlow int
}

func listOf(rs *RequestSample, w aggregate.Window) requestList {
	l := requestList{nSlow: len(rs.Slowest[w])}
	l.rows = make([]*event.Request, 0, len(rs.Slowest[w])+len(rs.Latest))
	l.rows = append(l.rows, rs.Slowest[w]...)
	l.rows = append(l.rows, rs.Latest...)
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

// renderRequests draws the requests view: the slowest of the window, then
// the latest, with the selected row marked.
func renderRequests(st *styles, l *requestList, sel int, begin time.Time, w aggregate.Window, width, height int) []string {
	lines := []string{
		rule(st, st.title.Render("requests")+" · "+w.String()+" · slowest first, then the latest"+st.dim.Render("   enter open  esc back  tab main"), width),
	}
	if len(l.rows) == 0 {
		return append(lines, fit(st.dim.Render(" no finished request yet"), width))
	}
	body := make([]string, 0, len(l.rows)+3)
	selLine := 0
	body = append(body, fit(st.dim.Render(" slowest in "+w.String()+" (by TTFT)"), width), fit(st.dim.Render(reqHeader), width))
	for i, r := range l.rows {
		if i == l.nSlow {
			body = append(body, fit(st.dim.Render(" latest"), width), fit(st.dim.Render(reqHeader), width))
		}
		if i == sel {
			selLine = len(body)
		}
		body = append(body, requestLine(st, r, begin, i == sel, width))
	}
	// Scroll so the selected row stays in view.
	room := height - len(lines)
	start := 0
	if selLine >= room {
		start = selLine - room + 1
	}
	end := min(len(body), start+room)
	return append(lines, body[start:end]...)
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
	if !r.OK() {
		outcome = st.bad.Render(failure(r))
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
