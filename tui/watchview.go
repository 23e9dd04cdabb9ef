package tui

import (
	"fmt"
	"strings"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// watching reports whether s is a session that watches a server's own
// traffic (latscope watch): the main view is then the watch view.
func watching(s *aggregate.Snapshot) bool {
	return s.Session != nil && s.Session.Load.Watches()
}

// phaseStage is the stage whose colour and letter draw a traffic phase.
func phaseStage(name string) event.Stage {
	switch name {
	case aggregate.PhaseQueue:
		return event.StageQueue
	case aggregate.PhasePrefill:
		return event.StagePrefill
	case aggregate.PhaseDecode:
		return stageDecode
	}
	return stageOther
}

// renderWatch is the watch view's top: the server's own traffic ("your
// users") as a stacked breakdown over every window, its rates and
// gauges, its bucket-estimated quantiles, and the canary beside it.
func renderWatch(st *styles, s *aggregate.Snapshot, win aggregate.Window, w int) []string {
	tr := s.Windows[win].Traffic
	title := st.title.Render("your users") + st.dim.Render(" · all traffic, server-reported ("+dialectOf(tr)+" histograms) · "+win.String())
	lines := []string{rule(st, title, w)}
	const labelW = 5
	barW := max(min(w-labelW-48, 80), 10)
	for _, ww := range []aggregate.Window{aggregate.Win10s, aggregate.Win1m, aggregate.Win5m, aggregate.WinRun} {
		t := s.Windows[ww].Traffic
		label := fmt.Sprintf(" %-4s", ww.String())
		if ww == win {
			label = st.bold.Render(label)
		}
		if len(t.Phases) == 0 {
			lines = append(lines, label+st.dim.Render(" no interval of the server's histograms yet"))
			continue
		}
		segs := make([]segment, 0, len(t.Phases))
		for _, p := range t.Phases {
			segs = append(segs, segment{stage: phaseStage(p.Name), value: p.Share})
		}
		lines = append(lines, label+"▕"+drawBar(st, barW, 1, 1, segs)+"▏ "+phaseLegend(st, t))
	}
	lines = append(lines, " "+trafficRates(tr)+"  "+aggregate.TrafficGauges(tr))
	lines = append(lines, quantileRows(st, s, tr)...)
	return append(lines, userSpanRows(st, tr.Spans, win, w)...)
}

// userSpanRows are the users' requests as the server's spans give them:
// their count, where their time went and their quantiles, each exact.
func userSpanRows(st *styles, u *aggregate.UserSpans, win aggregate.Window, w int) []string {
	if u == nil {
		return nil
	}
	head := fmt.Sprintf("your users' requests from the server's spans (%s): %d · ", win, u.Requests) + aggregate.UserSpanShares(u)
	lines := []string{fit(" "+head, w), fit(st.dim.Render(" server-reported per request, exact, never the canary's; tab lists them"), w)}
	var parts []string
	for _, m := range aggregate.UserSpanStats(u) {
		if m.Stats.Count > 0 {
			parts = append(parts, fmt.Sprintf("%s p50 %s p99 %s", m.Name, msUnit(m.Stats.P50), msUnit(m.Stats.P99)))
		}
	}
	return append(lines, fit(" "+strings.Join(parts, " · "), w))
}

func dialectOf(t aggregate.Traffic) string {
	if t.Dialect == "" {
		return "its"
	}
	return t.Dialect
}

// phaseLegend is "q queue 55% p prefill 3% - decode 41% o rest 1% of e2e",
// each phase in its colour.
func phaseLegend(st *styles, t aggregate.Traffic) string {
	parts := make([]string, 0, len(t.Phases)+1)
	for _, p := range t.Phases {
		stg := phaseStage(p.Name)
		swatch := string(infoOf(stg).letter)
		if !st.plain {
			swatch = st.stageStyle(stg).Render("█")
		}
		parts = append(parts, fmt.Sprintf("%s %s %.0f%%", swatch, p.Name, 100*p.Share))
	}
	of := "of e2e"
	if t.ShareOf != "e2e" {
		of = "of their sum"
	}
	return strings.Join(parts, " ") + st.dim.Render(" "+of)
}

func trafficRates(t aggregate.Traffic) string {
	if !t.Seen {
		return "no metrics yet"
	}
	s := "req/s not reported"
	if t.HasRequests {
		s = fmt.Sprintf("%s req/s", rate(t.ReqPerSec))
	}
	if t.HasTokens {
		s += fmt.Sprintf("  prompt %s tok/s  output %s tok/s", rate(t.PromptTokPerSec), rate(t.GenTokPerSec))
	}
	return s
}

// quantileRows lists the users' quantiles, each a bucket estimate with
// its bucket, and the canary's own beside them when there is one.
func quantileRows(st *styles, s *aggregate.Snapshot, tr aggregate.Traffic) []string {
	canary := s.Session != nil && s.Session.Load.Mode == event.LoadCanary
	head := fmt.Sprintf(" %-6s %-24s %-24s %-24s", "users", "p50", "p90", "p99")
	if canary {
		head += "│ canary (client-measured)  p50      p99"
	}
	out := []string{st.dim.Render(" users' quantiles: bucket estimate (±bucket), the value interpolated within the bucket shown"), st.dim.Render(head)}
	win := &s.Windows[aggregate.Win10s]
	for _, name := range []string{"ttft", "itl", "e2e"} {
		q, ok := tr.Quantiles[name]
		row := fmt.Sprintf(" %-6s", name)
		if ok {
			row += fmt.Sprintf(" %-24s %-24s %-24s", aggregate.EstimateText(q.P50), aggregate.EstimateText(q.P90), aggregate.EstimateText(q.P99))
		} else {
			row += fmt.Sprintf(" %-24s %-24s %-24s", "-", "-", "-")
		}
		if canary {
			row += "│ " + canaryCell(win, name)
		}
		out = append(out, row)
	}
	if canary {
		out = append(out, " "+canaryQueueLine(s, tr))
	}
	return out
}

func canaryCell(w *aggregate.WindowStats, name string) string {
	var st aggregate.Stats
	switch name {
	case "ttft":
		st = w.TTFT
	case "itl":
		st = w.ITL
	case "e2e":
		st = w.E2E
	}
	if st.Count == 0 {
		return fmt.Sprintf("%-26s", "-")
	}
	return fmt.Sprintf("%-26s %-8s %s", fmt.Sprintf("n %d", st.Count), msUnit(st.P50), msUnit(st.P99))
}

// canaryQueueLine sets the users' queue share beside the canary's, as the
// server reported it for the canary's own requests.
func canaryQueueLine(s *aggregate.Snapshot, tr aggregate.Traffic) string {
	users := "-"
	for _, p := range tr.Phases {
		if p.Name == aggregate.PhaseQueue {
			users = fmt.Sprintf("%.0f%% of e2e", 100*p.Share)
		}
	}
	w := &s.Windows[aggregate.Win10s]
	canary := "-"
	if q, ok := w.Breakdown[event.StageQueue]; ok && w.E2E.Count > 0 && w.E2E.Mean > 0 {
		canary = fmt.Sprintf("%.0f%% of e2e", 100*q.Mean/w.E2E.Mean)
	}
	return fmt.Sprintf("queue: users %s · canary %s (10s)", users, canary)
}
