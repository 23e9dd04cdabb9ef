package tui

import (
	"fmt"
	"strconv"
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
	otlpOK        bool   // a sampled request carried an OTLP span
	agent         string // what is shown of several agents (see agentLabel)
	down          string // why the figures shown stopped moving (see downText); "" while live
}

// headerLines is the header's height: the title, the rates and the status
// line, always, so nothing under it moves when a warning comes or goes.
const headerLines = 3

// renderHeader answers "is everything healthy, and what am I looking at?":
// the title, the rates, then one status line, blank when all is well.
func renderHeader(st *styles, fr *Frame, hs headerState, width int) []string {
	s := &fr.Snapshot
	status := ""
	if pb := fr.Playback; pb != nil {
		// A replay's progress leads the status line.
		status = progressLine(st, pb, fr.Finished, hs.playbackPause, min(max(width/4, 10), 40))
	}
	return []string{
		fit(headerTitle(st, fr, hs, width), width),
		fit(headerRates(st, s, hs, width), width),
		status + statusLine(st, warnings(s, fr.Status), fr.Notices, width-visibleWidth(status)),
	}
}

// progressLine is a replay's position on the recording as a bar w cells
// wide: " ▶ ━━━━━━────── 25%".
func progressLine(st *styles, pb *Playback, finished, paused bool, w int) string {
	frac := 0.0
	if pb.Length > 0 {
		frac = min(max(float64(pb.Position)/float64(pb.Length), 0), 1)
	}
	if finished {
		frac = 1
	}
	sign := "▶"
	if paused {
		sign = "⏸"
	}
	barW := max(w-9, 1)
	done := int(frac * float64(barW))
	return fit(" "+sign+" "+st.accent.Render(strings.Repeat("━", done))+st.faint.Render(strings.Repeat("─", barW-done))+
		fmt.Sprintf(" %3.0f%%", 100*frac), w)
}

// statusLine shows the warnings, as many as fit and a count of the rest
// (the help page lists them all); without warnings, the notices, dim and
// without the warning sign: they are news, not trouble.
func statusLine(st *styles, warns, notices []string, width int) string {
	if len(warns) > 0 {
		return foldItems(st, warns, st.bad, " ⚠ ", "  ⚠ ", " (? lists all)", width)
	}
	if len(notices) > 0 {
		return foldItems(st, notices, st.dim, " ", " · ", "", width)
	}
	return fit("", width)
}

// foldItems joins the items that fit whole, in order, then says how many
// did not: "+2 more". The first item is always shown, cut if it must be.
func foldItems(st *styles, items []string, style ink, first, sep, moreHint string, width int) string {
	line := first + items[0]
	for i := 1; i < len(items); i++ {
		more := st.dim.Render(fmt.Sprintf("  +%d more%s", len(items)-i-1, moreHint))
		if i == len(items)-1 {
			more = ""
		}
		if visibleWidth(line+sep+items[i]+more) > width {
			tail := st.dim.Render(fmt.Sprintf("  +%d more%s", len(items)-i, moreHint))
			return fit(style.Render(fitWords(line, width-visibleWidth(tail))), width-visibleWidth(tail)) + tail
		}
		line += sep + items[i]
	}
	return fit(style.Render(fitWords(line, width)), width)
}

func headerTitle(st *styles, fr *Frame, hs headerState, width int) string {
	s := &fr.Snapshot
	parts := []part{{"", st.title.Render(" latscope"), 10}}
	if pb := fr.Playback; pb != nil {
		parts = append(parts, part{" ", st.key.Render("replay"), 10})
	}
	if hs.agent != "" {
		parts = append(parts, part{"  ", st.key.Render(hs.agent), 10})
	}
	if h := s.Session; h != nil {
		if h.Target != "" {
			parts = append(parts, part{" ", st.dim.Render("▸ ") + h.Target, 4})
		}
		if what := joinNonEmpty(" · ", h.Server, h.Dialect, h.Model); what != "" {
			parts = append(parts, part{"  ", what, 2})
		}
		if hs.agent == "" && h.Name != "" {
			parts = append(parts, part{"  ", st.key.Render("@" + h.Name), 9})
		}
		if l := load(h, s.Probe); l != "" {
			parts = append(parts, part{"   ", l, 9})
		}
	}
	clock := clockText(st, fr)
	if hs.down != "" && fr.Playback == nil {
		// The elapsed time stopped with the events: say why.
		clock = st.bad.Render(hs.down) + " " + st.faint.Render(elapsedShort(fr.Snapshot.Elapsed))
	}
	parts = append(parts, part{"   ", clock, 10})
	// The window and statistic also head the breakdown: they go before the load.
	parts = append(parts, part{"   ", st.key.Render("["+hs.window.String()+"]") + " " + st.key.Render(hs.stat.String()), 8})
	if sim := simulated(s); sim != "" {
		parts = append(parts, part{"   ", st.warn.Render(sim), 10})
	}
	if hs.paused {
		parts = append(parts, part{"   ", st.warn.Render("PAUSED"), 10})
	}
	if hs.playbackPause {
		parts = append(parts, part{"   ", st.warn.Render("PLAYBACK PAUSED"), 10})
	}
	hint := st.dim.Render("? help")
	if fr.Finished {
		hint = st.key.Render("q quit") + st.dim.Render(" · ? help")
	}
	left := assemble(parts, width-visibleWidth(hint)-1)
	gap := max(width-visibleWidth(left)-visibleWidth(hint), 1)
	return left + strings.Repeat(" ", gap) + hint
}

// clockText is the elapsed time; a replay's position, length and speed;
// or, once the session has ended, that it finished and when.
func clockText(st *styles, fr *Frame) string {
	s := &fr.Snapshot
	if pb := fr.Playback; pb != nil {
		out := elapsedShort(pb.Position)
		if pb.Length > 0 {
			out += "/" + elapsedShort(pb.Length)
		}
		out += " " + speedText(pb.Speed)
		if fr.Finished {
			return st.good.Render("finished") + " " + out
		}
		return out
	}
	total := s.Elapsed
	if sw := fr.Sweep; sw != nil {
		total = sweepTotal(fr)
		if sw.Current != nil && !fr.Finished {
			return "step " + elapsedShort(sw.Current.Elapsed) + " · total " + elapsedShort(total)
		}
	}
	if fr.Finished {
		return st.good.Render("finished") + " " + elapsedShort(total)
	}
	return elapsed(s.Elapsed)
}

// sweepTotal is how long the sweep has run: from its first step's start,
// in event time, as the steps' own clocks are.
func sweepTotal(fr *Frame) time.Duration {
	sw := fr.Sweep
	if len(sw.Result.Steps) > 0 && !sw.Result.Steps[0].Start.IsZero() {
		return max(fr.Snapshot.Now.Sub(sw.Result.Steps[0].Start), 0)
	}
	if sw.Current != nil {
		return sw.Current.Elapsed
	}
	return fr.Snapshot.Elapsed
}

// speedText is a replay speed: "×1", "×10", "max".
func speedText(speed float64) string {
	switch {
	case speed <= 0:
		return "×1"
	case speed >= 1e6:
		return "max speed"
	}
	return "×" + strconv.FormatFloat(speed, 'g', 3, 64)
}

// part is a piece of a header line with the separator before it; the
// lowest priorities go first when the line is too long, and those of 10
// never go.
type part struct {
	sep, text string
	prio      int
}

// assemble joins the parts that fit in width, dropping the least important
// first and keeping the order of the rest. When even the parts that never
// go do not fit, the separators shrink to one space.
func assemble(parts []part, width int) string {
	keep := make([]bool, len(parts))
	for i := range parts {
		keep[i] = true
	}
	total := func(sepW int) int {
		n := 0
		for i, p := range parts {
			if keep[i] {
				n += visibleWidth(p.text) + min(visibleWidth(p.sep), sepW)
			}
		}
		return n
	}
	sepW := 3
	for total(sepW) > width {
		low := -1
		for i, p := range parts {
			if keep[i] && p.prio < 10 && (low < 0 || p.prio < parts[low].prio) {
				low = i
			}
		}
		// Shrink the separators before dropping anything that matters.
		if sepW > 1 && (low < 0 || parts[low].prio >= 9) {
			sepW = 1
			continue
		}
		if low < 0 {
			break
		}
		keep[low] = false
	}
	var b strings.Builder
	for i, p := range parts {
		if keep[i] {
			b.WriteString(p.sep[:min(len(p.sep), sepW)])
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
	case event.LoadWatch:
		return "watching its own traffic"
	case event.LoadCanary:
		return fmt.Sprintf("watching + canary %s/s", rate(l.Rate))
	}
	return l.Mode
}

func headerRates(st *styles, s *aggregate.Snapshot, hs headerState, width int) string {
	if hs.down != "" {
		return downRates(st)
	}
	w := &s.Windows[hs.window]
	var okPerSec float64
	if w.Span > 0 {
		okPerSec = float64(w.OK) / w.Span.Seconds()
	}
	parts := []part{
		{" ", "ok " + st.bold.Render(rate(okPerSec)) + " req/s", 10},
		{"   ", st.bold.Render(rate(w.TokPerSec)) + " tok/s", 8},
	}
	errText := "errors 0"
	if w.Sent > 0 {
		errText = "errors " + pct(float64(w.Errors)/float64(w.Sent))
	}
	errStyle := st.text
	if w.Errors > 0 {
		errStyle = st.bad
	}
	parts = append(parts, part{"   ", errStyle.Render(errText), 10})
	if s.Reasoning != nil {
		// Which first token the bar and the objectives measure to.
		parts = append(parts, part{"   ", st.warn.Render("reasoning model: " + aggregate.TTFTLabel(s.TTFTBasis, true)), 8})
	}
	if ks := errorKinds(s.Requests.ByOutcome, s.Requests.ByStatus); len(ks) > 0 {
		parts = append(parts, part{"", st.dim.Render(" (run: ") + joinKinds(ks, 3) + st.dim.Render(")"), 2})
	}
	if p := s.Probe; p != nil {
		parts = append(parts, part{"   ", fmt.Sprintf("in flight %d", p.InFlight), 6})
	}
	parts = append(parts, part{"   ", probeState(st, s.Probe, s.Verdict), 9})
	for _, x := range []string{scrapeState(st, s), otlpState(st, s, hs.otlpOK), nvmlState(st, s.GPU)} {
		if x != "" {
			parts = append(parts, part{"  ", x, 7})
		}
	}
	if kv := serverCache(st, &w.Traffic); kv != "" {
		parts = append(parts, part{"  ", kv, 1})
	}
	return assemble(parts, width)
}

// downRates is the rates line while nothing shown streams: zero, greyed,
// rather than the last window's rates frozen as if current.
func downRates(st *styles) string {
	return st.faint.Render(" ok "+rate(0)+" req/s   "+rate(0)+" tok/s   errors –") + st.dim.Render("   (no events arriving)")
}

// probeState is the probe's badge: the aggregator's verdict (✓ kept pace,
// ! paused briefly or the client host saturated, ✗ held, – unknown), then its latest CPU and, where it measured any, its
// scheduling lag.
func probeState(st *styles, p *event.ProbeSample, v aggregate.ProbeVerdict) string {
	mark := st.dim.Render("–")
	switch v.State {
	case aggregate.ProbeKeptPace:
		mark = st.good.Render("✓")
	case aggregate.ProbePaused, aggregate.ProbeHostBusy:
		mark = st.warn.Render("!")
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

// serverCache is what serving engineers ask of a server first, from its
// metrics over the window: "KV 12% · preempted 0 · prefix hits 4%", each
// part only where the server gives it.
func serverCache(st *styles, t *aggregate.Traffic) string {
	var parts []string
	if t.HasKVCache {
		parts = append(parts, fmt.Sprintf("KV %.0f%%", 100*t.KVCache))
	}
	if t.HasPreemptions {
		text := fmt.Sprintf("preempted %.0f", t.Preemptions)
		if t.Preemptions > 0 {
			text = st.warn.Render(text)
		}
		parts = append(parts, text)
	}
	if t.PrefixFrom != "" {
		parts = append(parts, fmt.Sprintf("prefix hits %.0f%%", 100*t.PrefixHitRate))
	}
	return strings.Join(parts, st.dim.Render(" · "))
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
	case g.Collector == event.GPUCollectorExporter:
		return exporterState(st, g)
	case !g.Available:
		return "nvml " + st.bad.Render("✗")
	}
	return "nvml " + st.good.Render("✓")
}

// warnings lists what is in trouble, with the reason and the figure.
func warnings(s *aggregate.Snapshot, status []string) []string {
	var out []string
	if s.Verdict.Held() || s.Verdict.State == aggregate.ProbeHostBusy {
		out = append(out, s.Verdict.VerdictText())
	}
	if aggregate.HostBusyNow(s.Host) {
		out = append(out, "the client host is busy, timings include its delays: "+s.Host.LatestLine())
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
