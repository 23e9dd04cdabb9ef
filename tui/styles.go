package tui

import (
	"strconv"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/latscope/latscope/event"
)

// palette holds every colour the dashboard uses; nothing else names one.
// A stage has the same hue on every panel.
type palette struct {
	text, dim, faint, accent, good, warn, bad, sel lipgloss.Color
	stage                                          map[event.Stage]lipgloss.Color
	p50, p99, slo, waiting, running, inFlight      lipgloss.Color
	tokens                                         lipgloss.Color
}

func defaultPalette() palette {
	return palette{
		text: "252", dim: "245", faint: "240", accent: "39", good: "42", warn: "214", bad: "196", sel: "236",
		stage: stageColours(),
		p50:   "77", p99: "203", slo: "214", waiting: "203", running: "77", inFlight: "39", tokens: "220",
	}
}

// in returns the palette with every colour already in the terminal's
// profile: lipgloss converts a colour the profile lacks on every render,
// and on a 16-colour terminal each 256-colour index costs a search of the
// 16 by perceptual distance, per cell of every chart: a third of the
// dashboard's CPU.
func (p palette) in(prof termenv.Profile) palette {
	c := func(col lipgloss.Color) lipgloss.Color { return inProfile(prof, col) }
	out := palette{
		text: c(p.text), dim: c(p.dim), faint: c(p.faint), accent: c(p.accent), good: c(p.good), warn: c(p.warn),
		bad: c(p.bad), sel: c(p.sel), p50: c(p.p50), p99: c(p.p99), slo: c(p.slo), waiting: c(p.waiting),
		running: c(p.running), inFlight: c(p.inFlight), tokens: c(p.tokens),
		stage: make(map[event.Stage]lipgloss.Color, len(p.stage)),
	}
	for st, col := range p.stage {
		out.stage[st] = c(col)
	}
	return out
}

// inProfile is col as prof shows it, named so that prof takes it as it is.
func inProfile(prof termenv.Profile, col lipgloss.Color) lipgloss.Color {
	switch v := prof.Color(string(col)).(type) {
	case termenv.ANSIColor:
		return lipgloss.Color(strconv.Itoa(int(v)))
	case termenv.ANSI256Color:
		return lipgloss.Color(strconv.Itoa(int(v)))
	}
	return col
}

// stageColours are the stages' colours from event.StageTable (stageOther's
// too), with the dashboard's own pseudo-stages.
func stageColours() map[event.Stage]lipgloss.Color {
	m := map[event.Stage]lipgloss.Color{stageTTFT: "39", stageDecode: "220"}
	for _, s := range event.StageTable() {
		m[s.Stage] = lipgloss.Color(s.Term)
	}
	return m
}

// styles are the palette turned into lipgloss styles, all from one
// renderer (so tests and NO_COLOR need no global state).
type styles struct {
	// plain is set when colour is off: bar segments then show their
	// stage's letter, and breaches carry a "!".
	plain bool

	text, dim, faint, bold, title, accent ink
	good, warn, bad, selected, key        ink
	stage                                 map[event.Stage]ink
	marker                                map[event.MarkerKind]ink
	p50, p99, slo, waiting, running       ink
	inFlight, tokens                      ink
}

func newStyles(r *lipgloss.Renderer, noColor bool) *styles {
	if noColor {
		r.SetColorProfile(termenv.Ascii)
	}
	p := defaultPalette().in(r.ColorProfile())
	fg := func(c lipgloss.Color) ink { return newInk(r.NewStyle().Foreground(c)) }
	s := &styles{
		plain:    noColor || r.ColorProfile() == termenv.Ascii,
		text:     fg(p.text),
		dim:      fg(p.dim),
		faint:    fg(p.faint),
		bold:     newInk(r.NewStyle().Bold(true)),
		title:    newInk(fg(p.accent).style.Bold(true)),
		accent:   fg(p.accent),
		good:     fg(p.good),
		warn:     newInk(fg(p.warn).style.Bold(true)),
		bad:      newInk(fg(p.bad).style.Bold(true)),
		selected: newInk(r.NewStyle().Background(p.sel).Bold(true)),
		key:      newInk(fg(p.accent).style.Bold(true)),
		stage:    make(map[event.Stage]ink, len(p.stage)),
		p50:      fg(p.p50),
		p99:      fg(p.p99),
		slo:      fg(p.slo),
		waiting:  fg(p.waiting),
		running:  fg(p.running),
		inFlight: fg(p.inFlight),
		tokens:   fg(p.tokens),
	}
	for st, c := range p.stage {
		s.stage[st] = fg(c)
	}
	s.marker = map[event.MarkerKind]ink{
		event.MarkerStall:      s.bad,
		event.MarkerGap:        s.warn,
		event.MarkerProbeLimit: s.bad,
		event.MarkerInsight:    s.accent,
		event.MarkerCollector:  s.warn,
		event.MarkerNote:       s.dim,
		markerSLO:              s.bad,
		markerErrors:           s.bad,
	}
	return s
}

// stageStyle returns the style of stage st: a stage the server named
// itself takes their entry's (event.MetaOf), any other unknown one
// other's.
func (s *styles) stageStyle(st event.Stage) ink {
	if x, ok := s.stage[st]; ok {
		return x
	}
	if _, own := event.ServerOwnStage(st); own {
		return s.stage[event.StageServerOwn]
	}
	return s.stage[stageOther]
}

func (s *styles) markerStyle(k event.MarkerKind) ink {
	if x, ok := s.marker[k]; ok {
		return x
	}
	return s.dim
}
