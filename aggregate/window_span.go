package aggregate

import "time"

// Span returns how long window w looks back: 0 for WinRun, the whole run,
// whose length only a snapshot knows (WindowStats.Span).
func (w Window) Span() time.Duration {
	switch w {
	case Win10s:
		return fineSlots * fineWidth
	case Win1m:
		return slotsPer1m * coarseWidth
	case Win5m:
		return slotsPer5m * coarseWidth
	}
	return 0
}

// Words names window w in a sentence: "10 s", "1 min", "5 min", "whole run".
func (w Window) Words() string {
	switch w {
	case Win10s:
		return "10 s"
	case Win1m:
		return "1 min"
	case Win5m:
		return "5 min"
	case WinRun:
		return "whole run"
	}
	return "unknown window"
}

// SeriesWindow is the window each point of a time series (one a second)
// summarises: a chart of TTFT p99 plots, at every second, the p99 of the
// SeriesWindow that ended there, whatever span of seconds it shows.
const SeriesWindow = Win10s

// runMean names the window and statistic of the whole-run shares (a
// stage's total over the TTFT total: the mean breakdown) for an insight
// that quotes one, since the dashboard beside it may show another window
// or band: "mean, whole run".
func runMean() string { return BandMean.String() + ", " + WinRun.Words() }
