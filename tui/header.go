package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// headerState is what the header needs besides the frame.
type headerState struct {
	window        aggregate.Window
	stat          aggregate.BandStat
	paused        bool
	playbackPause bool
	otlpOK        bool // a sampled request carried an OTLP span
}

// renderHeader answers "is everything healthy, and what am I looking at?":
// two lines, then one warning line per source in trouble.
func renderHeader(st *styles, fr *Frame, hs headerState, width int) []string {
	s := &fr.Snapshot
	lines := []string{fit(headerTitle(st, s, hs, width), width), fit(headerRates(st, s, hs, width), width)}
	for _, w := range warnings(s, fr.Status) {
		lines = append(lines, fit(st.bad.Render(" ⚠ "+w), width))
	}
	return lines
}

func headerTitle(st *styles, s *aggregate.Snapshot, hs headerState, width int) string {
	parts := []part{{st.title.Render(" latscope"), 9}}
	if h := s.Session; h != nil {
		parts = append(parts, part{st.dim.Render(" ▸ ") + h.Target, 8})
		if what := joinNonEmpty(" · ", h.Server, h.Dialect, h.Model); what != "" {
			parts = append(parts, part{"  " + what, 4})
		}
		if l := load(h, s.Probe); l != "" {
			parts = append(parts, part{"   " + l, 5})
		}
		if h.Name != "" {
			parts = append(parts, part{st.dim.Render("  @" + h.Name), 3})
		}
	}
	parts = append(parts,
		part{"   " + elapsed(s.Elapsed), 7},
		part{"   " + st.key.Render("["+hs.window.String()+"]") + " " + st.key.Render(hs.stat.String()), 9})
	if sim := simulated(s); sim != "" {
		parts = append(parts, part{"   " + st.warn.Render(sim), 10})
	}
	if hs.paused {
		parts = append(parts, part{"   " + st.warn.Render("PAUSED"), 10})
	}
	if hs.playbackPause {
		parts = append(parts, part{"   " + st.warn.Render("PLAYBACK PAUSED"), 10})
	}
	left := assemble(parts, width-8)
	help := st.dim.Render("? help")
	if gap := width - visibleWidth(left) - visibleWidth(help) - 1; gap > 2 {
		return left + strings.Repeat(" ", gap) + help
	}
	return left
}

// part is a piece of a header line; the lowest priorities go first when the
// line is too long.
type part struct {
	text string
	prio int
}

// assemble joins the parts that fit in width, dropping the least important
// first and keeping the order of the rest.
func assemble(parts []part, width int) string {
	keep := make([]bool, len(parts))
	total := 0
	for i, p := range parts {
		keep[i] = true
		total += visibleWidth(p.text)
	}
	for total > width {
		low := -1
		for i, p := range parts {
			if keep[i] && (low < 0 || p.prio < parts[low].prio) {
				low = i
			}
		}
		if low < 0 || parts[low].prio >= 9 {
			break
		}
		keep[low] = false
		total -= visibleWidth(parts[low].text)
	}
	var b strings.Builder
	for i, p := range parts {
		if keep[i] {
			b.WriteString(p.text)
		}
	}
	return b.String()
}

// simulated names what is simulated; empty when nothing is.
func simulated(s *aggregate.Snapshot) string {
	server := s.Session != nil && s.Session.Simulated
	gpu := s.GPU != nil && s.GPU.Simulated
	switch {
	case server && gpu:
		return "SIMULATED server+GPU"
	case server:
		return "SIMULATED server"
	case gpu:
		return "SIMULATED GPU"
	}
	return ""
}

func load(h *event.Session, p *event.ProbeSample) string {
	l := h.Load
	switch l.Mode {
	case "closed":
		return fmt.Sprintf("closed loop c=%d", l.Concurrency)
	case "open":
		s := fmt.Sprintf("open loop %s/s", rate(l.Rate))
		if l.Arrival != "" {
			s += " " + l.Arrival
		}
		return s
	case "steps":
		if p != nil && p.Concurrency > 0 {
			return fmt.Sprintf("stepped c=%d", p.Concurrency)
		}
		return "stepped load"
	case "sweep":
		if l.Arrival != "" {
			return "sweep " + l.Arrival
		}
	}
	return l.Mode
}

func headerRates(st *styles, s *aggregate.Snapshot, hs headerState, width int) string {
	w := &s.Windows[hs.window]
	var okPerSec float64
	if w.Span > 0 {
		okPerSec = float64(w.OK) / w.Span.Seconds()
	}
	parts := []part{
		{" ok " + st.bold.Render(rate(okPerSec)) + " req/s", 9},
		{"   " + st.bold.Render(rate(w.TokPerSec)) + " tok/s", 8},
	}
	errText := "errors 0"
	if w.Sent > 0 {
		errText = "errors " + pct(float64(w.Errors)/float64(w.Sent))
	}
	errStyle := st.text
	if w.Errors > 0 {
		errStyle = st.bad
	}
	parts = append(parts, part{"   " + errStyle.Render(errText), 9})
	if s.Reasoning != nil {
		// Which first token the bar and the objectives measure to.
		parts = append(parts, part{"   " + st.warn.Render("reasoning model: "+aggregate.TTFTLabel(s.TTFTBasis, true)), 8})
	}
	if ks := errorKinds(s.Requests.ByOutcome, s.Requests.ByStatus); len(ks) > 0 {
		parts = append(parts, part{st.dim.Render(" (run: ") + joinKinds(ks, 3) + st.dim.Render(")"), 2})
	}
	if p := s.Probe; p != nil {
		parts = append(parts, part{fmt.Sprintf("   in flight %d", p.InFlight), 6})
	}
	parts = append(parts, part{"   " + probeState(st, s.Probe, s.Verdict), 9})
	for _, x := range []string{scrapeState(st, s), otlpState(st, s, hs.otlpOK), nvmlState(st, s.GPU)} {
		if x != "" {
			parts = append(parts, part{"  " + x, 7})
		}
	}
	return assemble(parts, width)
}

// probeState is the probe's badge: the aggregator's verdict (✓ kept pace,
// ✗ held, – unknown), then its latest CPU and, where it measured any, its
// scheduling lag.
func probeState(st *styles, p *event.ProbeSample, v aggregate.ProbeVerdict) string {
	mark := st.dim.Render("–")
	switch v.State {
	case aggregate.ProbeKeptPace:
		mark = st.good.Render("✓")
	case aggregate.ProbeHeld:
		mark = st.bad.Render("✗")
	}
	out := "probe " + mark
	if p == nil {
		return out
	}
	if p.CPUPercent >= 0 {
		out += fmt.Sprintf(" cpu %.0f%%", p.CPUPercent)
	}
	if p.LagSamples > 0 { // the probe times only scheduled sends
		out += " lag " + msUnit(float64(p.SchedLagP99)/float64(time.Millisecond))
	}
	return out
}

func scrapeState(st *styles, s *aggregate.Snapshot) string {
	srv := &s.Server
	switch {
	case srv.Samples == 0 && (s.Session == nil || s.Session.MetricsURL == ""):
		return ""
	case srv.Samples == 0:
		return "scrape " + st.dim.Render("–")
	case srv.LastStale || srv.LastError != "":
		return "scrape " + st.bad.Render("✗")
	}
	return "scrape " + st.good.Render("✓")
}

// otlpRecent is how long a refused-export marker keeps the OTLP state red.
const otlpRecent = 30 * time.Second

func otlpState(st *styles, s *aggregate.Snapshot, joined bool) string {
	if m := otlpTrouble(s); m != nil {
		return "otlp " + st.bad.Render("✗")
	}
	if joined {
		return "otlp " + st.good.Render("✓")
	}
	return ""
}

func otlpTrouble(s *aggregate.Snapshot) *event.Marker {
	for i := len(s.Markers.Recent) - 1; i >= 0; i-- {
		m := &s.Markers.Recent[i]
		// Refused exports (the receiver) and requests whose span never came
		// (the attributor) are trouble; the receiver's notes are not.
		if m.Kind == event.MarkerCollector && (m.Source == "collector.otlp" || m.Source == "attributor") && s.Now.Sub(m.Time) < otlpRecent {
			return m
		}
	}
	return nil
}

func nvmlState(st *styles, g *event.GPUSample) string {
	switch {
	case g == nil:
		return ""
	case g.Simulated:
		return "gpu " + st.warn.Render("SIMULATED")
	case !g.Available:
		return "nvml " + st.bad.Render("✗")
	}
	return "nvml " + st.good.Render("✓")
}

// warnings lists what is in trouble, with the reason and the figure.
func warnings(s *aggregate.Snapshot, status []string) []string {
	var out []string
	if s.Verdict.Held() {
		out = append(out, s.Verdict.VerdictText())
	}
	if srv := &s.Server; srv.Samples > 0 && (srv.LastStale || srv.LastError != "") {
		w := "metrics scrape failing"
		if srv.LastError != "" {
			w += ": " + srv.LastError
		}
		out = append(out, w+" (queue depth and server stages are stale)")
	}
	if m := otlpTrouble(s); m != nil {
		out = append(out, "OTLP join: "+m.Message)
	}
	if u := s.Unexported; u.Events > 0 {
		out = append(out, fmt.Sprintf("%s spans not exported: %s", count(u.Events), u.Reason))
	}
	if len(s.Lost) > 0 {
		var parts []string
		for _, k := range sortedKeys(s.Lost) {
			parts = append(parts, fmt.Sprintf("%s %s", k, count(s.Lost[k])))
		}
		out = append(out, "events lost by: "+strings.Join(parts, ", "))
	}
	return append(out, status...)
}

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}
