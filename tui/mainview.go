package tui

import (
	"strings"

	"github.com/charmbracelet/x/ansi"

	"github.com/latscope/latscope/event"
)

// Layout thresholds. When space runs short the main view folds in a fixed
// order: first the charts go, then the GPU histories. The legend's rows
// depend on the height alone, and the header and the bar always stay.
const (
	chartsMinWidth  = 110 // below this the charts go
	chartMinLines   = 6   // a chart's title, four plot lines and its axis
	historyMinWidth = 100 // below this the GPU histories go
	bottomMinLines  = 3   // the GPU and markers panels: a title and two lines
)

// legendRowsFor is how many rows the legend has at height h: reserved
// whether or not they are full, so the table under it never moves.
func legendRowsFor(h int) int {
	switch {
	case h >= 45:
		return 3
	case h >= 32:
		return 2
	}
	return 1
}

// mainLayout is what the main view decided to show.
type mainLayout struct {
	charts       int // how many, 0 for none
	chartW       int
	midH         int // the stage table's (and charts') lines
	bottomH      int // the GPU's and markers' lines
	gpuHistories bool
	gpuW         int
}

// layoutMain decides the fold for a screen w × h given the fixed parts'
// heights: the header, the breakdown, the stage table's wish, and the GPUs
// to list.
func layoutMain(w, h, headerH, barH, tableNeed, gpuDevices int) mainLayout {
	l := mainLayout{gpuHistories: w >= historyMinWidth}
	avail := max(h-1-headerH-barH, 0) // less the footer, the header, the bar
	devices := max(gpuDevices, 1)
	gpuNeed := 1 + devices
	if l.gpuHistories {
		gpuNeed = 1 + 2*devices
	}
	// The bottom panels want room for the GPUs and a few markers; the table
	// (and the charts beside it) get the rest, but never less than the
	// table needs while the bottom can give.
	want := max(gpuNeed, 8)
	l.midH = max(avail-want, min(tableNeed, avail-bottomMinLines))
	l.midH = min(max(l.midH, 0), avail)
	l.bottomH = avail - l.midH
	if l.gpuHistories && l.bottomH < gpuNeed {
		l.gpuHistories = false
	}
	if w >= chartsMinWidth {
		l.charts = min(int(numCharts), l.midH/chartMinLines)
		l.chartW = w - tableWidth - 1
	}
	l.gpuW = min(w/2, 40)
	if l.gpuHistories {
		l.gpuW = min(tableWidth, w/2)
	}
	return l
}

func (m *model) renderMain() []string {
	st, w := m.st, m.width
	s := &m.frame.Snapshot
	lines := m.header()
	if watching(s) {
		return m.renderWatchMain(lines)
	}
	bd := breakdownOf(s, m.window, m.stat)
	var sources []breakdown
	for i := range m.frame.Sources {
		sources = append(sources, breakdownOf(&m.frame.Sources[i], m.window, m.stat))
	}
	bar, hits := renderBreakdown(st, bd, sources, legendRowsFor(m.height), m.window, m.highlight, w)
	m.legendHits = hits
	for i := range m.legendHits {
		m.legendHits[i].line += len(lines)
	}
	rows := tableRows(s, m.window)
	// The table's wish only grows: stages that come and go (connect, on a
	// new connection) must not move the panels under it every few seconds.
	m.tableNeed = max(m.tableNeed, 1+len(rows))
	devices := 0
	if s.GPU != nil {
		devices = len(s.GPU.Devices)
	}
	agents := renderAgents(st, m.full.Agents, m.shown, m.window, w)
	l := layoutMain(w, m.height, len(lines), len(bar)+len(agents), m.tableNeed, devices)
	lines = append(lines, bar...)
	lines = append(lines, agents...)

	objectives := m.objectivesOf(s)
	table := renderTable(st, rows, breaches(objectives, &s.Windows[m.window]), m.window, tableWidth, l.midH)
	markRow(st, table, m.highlight)
	if l.charts > 0 {
		chartH := l.midH / l.charts
		m.charts.update(st, m.hist, m.window, m.begin(), objectives, l.charts, l.chartW, chartH)
		var right []string
		for k := range l.charts {
			right = append(right, pad(m.charts.views[k], chartH)...)
		}
		if m.frame.Sweep != nil {
			right = renderSweep(st, m.frame.Sweep, objectives, l.chartW, l.midH)
		}
		lines = append(lines, beside(st, l.midH, column{table, tableWidth}, column{right, l.chartW})...)
	} else {
		lines = append(lines, pad(table, l.midH)...)
	}

	if l.bottomH > 0 {
		l.gpuW = gpuWidth(s.GPU, l, w)
		gpu := renderGPU(st, s.GPU, &m.gpu, l.gpuHistories, l.gpuW, l.bottomH)
		markW := w - l.gpuW - 1
		marks := append([]string{rule(st, st.title.Render("markers")+st.dim.Render(" (newest first)"), markW)},
			renderMarkers(st, markerRows(s), markW, l.bottomH-1)...)
		lines = append(lines, beside(st, l.bottomH, column{gpu, l.gpuW}, column{marks, markW})...)
	}
	return lines
}

// renderWatchMain is the main view of a watch session: the watch panel,
// then the GPUs and the markers below it.
func (m *model) renderWatchMain(lines []string) []string {
	st, w, s := m.st, m.width, &m.frame.Snapshot
	lines = append(lines, renderWatch(st, s, m.window, w)...)
	bottomH := max(m.height-1-len(lines), 0)
	if bottomH < bottomMinLines {
		return lines
	}
	l := mainLayout{gpuHistories: w >= historyMinWidth, gpuW: min(w/2, 40)}
	if l.gpuHistories {
		l.gpuW = min(tableWidth, w/2)
	}
	l.gpuW = gpuWidth(s.GPU, l, w)
	gpu := renderGPU(st, s.GPU, &m.gpu, l.gpuHistories, l.gpuW, bottomH)
	markW := w - l.gpuW - 1
	marks := append([]string{rule(st, st.title.Render("markers")+st.dim.Render(" (newest first)"), markW)},
		renderMarkers(st, markerRows(s), markW, bottomH-1)...)
	return append(lines, beside(st, bottomH, column{gpu, l.gpuW}, column{marks, markW})...)
}

// markRow picks out the table row of the stage picked on the legend.
func markRow(st *styles, table []string, hl event.Stage) {
	if hl == "" {
		return
	}
	for i, l := range table {
		plain := ansi.Strip(l)
		if strings.HasPrefix(plain, " "+string(hl)+" ") {
			table[i] = st.selected.Render("▸" + plain[1:])
		}
	}
}

// gpuWidth widens the GPU panel, up to half the screen, so that its
// devices' names show whole beside 8-cell histories.
func gpuWidth(g *event.GPUSample, l mainLayout, w int) int {
	if g == nil || !l.gpuHistories {
		return l.gpuW
	}
	need := 0
	for _, d := range g.Devices {
		need = max(need, gpuLineWidth(gpuLabelWidth(d), 8))
	}
	return max(l.gpuW, min(need, w/2))
}
