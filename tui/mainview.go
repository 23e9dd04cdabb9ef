package tui

// Layout thresholds. When space runs short the main view folds in a fixed
// order: first the charts go, then the GPU histories, then the legend
// shrinks to one line. The header and the bar always stay.
const (
	chartsMinWidth  = 110 // below this the charts go
	chartMinLines   = 6   // a chart's title, four plot lines and its axis
	historyMinWidth = 100 // below this the GPU histories go
	legendMaxLines  = 3
	bottomMinLines  = 3 // the GPU and markers panels: a title and two lines
)

// mainLayout is what the main view decided to show.
type mainLayout struct {
	legend       legendMode
	charts       int // how many, 0 for none
	chartW       int
	midH         int // the stage table's (and charts') lines
	bottomH      int // the GPU's and markers' lines
	gpuHistories bool
	gpuW         int
}

// layoutMain decides the fold for a screen w × h given the fixed parts'
// heights: the header, the breakdown with a full or a short legend, the
// stage table's wish, and the GPUs to list.
func layoutMain(w, h, headerH, barFull, barShort, tableNeed, gpuDevices int) mainLayout {
	l := mainLayout{legend: legendFull, gpuHistories: w >= historyMinWidth}
	avail := h - 1 - headerH - barFull // less the footer, the header, the bar
	// The legend shrinks last: only when the table would not fit otherwise.
	if avail-bottomMinLines < tableNeed && barShort < barFull {
		l.legend = legendShort
		avail = h - 1 - headerH - barShort
	}
	avail = max(avail, 0)
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
	bd := breakdownOf(s, m.window, m.stat)
	var sources []breakdown
	for i := range m.frame.Sources {
		sources = append(sources, breakdownOf(&m.frame.Sources[i], m.window, m.stat))
	}
	full := renderBreakdown(st, bd, sources, legendFull, m.window, w)
	short := renderBreakdown(st, bd, sources, legendShort, m.window, w)
	full = capLegend(full, len(short))
	rows := tableRows(s, m.window)
	devices := 0
	if s.GPU != nil {
		devices = len(s.GPU.Devices)
	}
	l := layoutMain(w, m.height, len(lines), len(full), len(short), 1+len(rows), devices)
	if l.legend == legendShort {
		full = short
	}
	lines = append(lines, full...)

	objectives := m.objectivesOf(s)
	table := renderTable(st, rows, breaches(objectives, &s.Windows[m.window]), m.window, tableWidth, l.midH)
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
		gpu := renderGPU(st, s.GPU, &m.gpu, l.gpuHistories, l.gpuW, l.bottomH)
		markW := w - l.gpuW - 1
		marks := append([]string{rule(st, st.title.Render("markers")+st.dim.Render(" (newest first)"), markW)},
			renderMarkers(st, markerRows(s), markW, l.bottomH-1)...)
		lines = append(lines, beside(st, l.bottomH, column{gpu, l.gpuW}, column{marks, markW})...)
	}
	return lines
}

// capLegend keeps at most legendMaxLines legend lines in a full breakdown,
// so a long list of stages cannot push everything else off the screen.
func capLegend(lines []string, shortLen int) []string {
	// The full breakdown has shortLen-1+k lines for k legend lines.
	k := len(lines) - (shortLen - 1)
	if k <= legendMaxLines {
		return lines
	}
	out := append([]string{}, lines[:2+legendMaxLines]...)
	return append(out, lines[2+k:]...)
}
