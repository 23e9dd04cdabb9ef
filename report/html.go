package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// The HTML report is one offline file: html/template escapes every value
// taken from a recording, the page has no scripts and fetches nothing, and
// its Content-Security-Policy forbids both, so even a page edited by hand
// cannot load anything.

//go:embed report.html.tmpl
var pageSource string

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"f":      func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) },
	"add":    func(a, b float64) float64 { return a + b },
	"strong": func(t table, i int) bool { return i < len(t.Strong) && t.Strong[i] },
	// isNum tells the cells to right-align: numbers, percentages, p-values
	// like <0.0001, and the dash of a missing value.
	"isNum": func(s string) bool {
		if s == "-" {
			return true
		}
		_, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(s, "< "), "%"), 64)
		return err == nil
	},
}).Parse(pageSource))

// page is what the template draws.
type page struct {
	Title     string
	Simulated []string // one banner per simulated run
	Warnings  []string
	Overview  [][2]string
	Intro     []table // before the charts: the comparison's tables
	Breakdown barChart
	Sweep     *xyChart    // a sweep's curve, first: it is the sweep's answer
	Charts    []lineChart // over time
	Scatter   *xyChart    // a run's latency against its throughput
	Tables    []table     // after the charts
	File      string
}

func writeHTML(w io.Writer, rec *Recording) error {
	p := page{
		Title:    "latscope report: " + rec.Name(),
		Warnings: rec.Warnings,
		Overview: overview(rec),
		Breakdown: breakdownChart("breakdown", "TTFT breakdown: where the time to first token goes (ms)", rec.Simulated(), []bandBar{
			{"mean", rec.Bands[aggregate.BandMean]}, {"slowest 1%", rec.Bands[aggregate.BandP99]},
		}, provenanceOf(rec)),
		Charts: timeCharts("run", rec),
		Tables: sections(rec),
		File:   rec.Path,
	}
	scatter := latencyThroughputChart("run-latency-throughput", rec)
	p.Scatter = &scatter
	if rec.Sweep != nil {
		curve := sweepCurveChart(rec.Sweep, rec.Simulated())
		p.Sweep = &curve
	}
	p.Simulated = simulatedBanners(rec)
	return pageTemplate.Execute(w, p)
}

func writeHTMLComparison(w io.Writer, c *Comparison) error {
	base, other := c.Base, c.Other
	sig := changesTable(c, true)
	all := changesTable(c, false)
	all.Notes = ruleNotes(c)
	p := page{
		Title: fmt.Sprintf("latscope comparison: %s vs %s", base.Name(), other.Name()),
		Intro: []table{sideBySide(c), sig, all},
		Breakdown: breakdownChart("breakdown", "TTFT breakdown, base and other (ms)", base.Simulated() || other.Simulated(), []bandBar{
			{"base: mean", base.Bands[aggregate.BandMean]}, {"other: mean", other.Bands[aggregate.BandMean]},
			{"base: slowest 1%", base.Bands[aggregate.BandP99]}, {"other: slowest 1%", other.Bands[aggregate.BandP99]},
		}, func(st event.Stage) []event.Provenance {
			return union(provenanceOf(base)(st), provenanceOf(other)(st))
		}),
		Charts: comparisonCharts(base, other),
		File:   base.Path + " vs " + other.Path,
	}
	if w := c.MismatchWarning(); w != "" {
		p.Warnings = append(p.Warnings, w)
	}
	for _, r := range []*Recording{base, other} {
		p.Warnings = append(p.Warnings, r.Warnings...)
		p.Simulated = append(p.Simulated, simulatedBanners(r)...)
	}
	return pageTemplate.Execute(w, p)
}

func simulatedBanners(rec *Recording) []string {
	if note := rec.SimulatedNote(); note != "" {
		return []string{note}
	}
	return nil
}

func provenanceOf(rec *Recording) func(event.Stage) []event.Provenance {
	return func(st event.Stage) []event.Provenance { return rec.Summary.Breakdown.Stages[st].MainProvenances() }
}

func union(a, b []event.Provenance) []event.Provenance {
	out := append([]event.Provenance{}, a...)
	for _, p := range b {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// Line styles: a run's p50 is solid and its p99 dashed; in a comparison
// the base is blue and the other run vermillion, and every line is named
// at its end, so the charts read in grey too. The colours are the stage
// table's palette (event.ChartBlue and the others).
const (
	blue       = event.ChartBlue
	vermillion = event.ChartVermillion
	orange     = event.ChartOrange
	green      = event.ChartGreen
	dashed     = "8 4"
	dotted     = "2 3"
)

// timeCharts are a run's charts over time: TTFT and ITL, the load they
// were measured under (a small chart on the same time axis, right below
// them) and the queue.
func timeCharts(id string, rec *Recording) []lineChart {
	sim, pts := rec.Simulated(), rec.Series.Points
	over := "each point: the " + windowWords(rec.Series.Window) + " before it"
	load := sizedTimeChart(180, id+"-load", "Load over time, on the same time axis: completed requests per second ("+over+")", "req/s", sim, []lineSpec{
		{"completed (ok/s)", green, "", pts, func(p Point) float64 { return p.OKPerSec }},
	})
	return []lineChart{
		timeChart(id+"-ttft", "TTFT over time, p50 and p99 (ms; "+over+")", "TTFT (ms)", sim, []lineSpec{
			{"p50", blue, "", pts, ttftP50}, {"p99", vermillion, dashed, pts, ttftP99},
		}),
		timeChart(id+"-itl", "Inter-token latency over time, p50 and p99 (ms; "+over+")", "ITL (ms)", sim, []lineSpec{
			{"p50", blue, "", pts, itlP50}, {"p99", vermillion, dashed, pts, itlP99},
		}),
		load,
		timeChart(id+"-queue", "Queue depth over time (requests; latest reading at each point)", "requests", sim, []lineSpec{
			{"waiting (server)", orange, "", pts, waiting},
			{"running (server)", blue, dashed, pts, func(p Point) float64 { return p.Running }},
			{"in flight (probe)", green, dotted, pts, inFlight},
		}),
	}
}

// comparisonCharts overlay the two runs, each from its own start.
func comparisonCharts(base, other *Recording) []lineChart {
	sim := base.Simulated() || other.Simulated()
	a, b := base.Series.Points, other.Series.Points
	over := "each point: the " + windowWords(base.Series.Window) + " before it"
	if base.Series.Window != other.Series.Window {
		over = "each point: the " + windowWords(base.Series.Window) + " (base) or " + windowWords(other.Series.Window) + " (other) before it"
	}
	pair := func(value func(Point) float64, name string) []lineSpec {
		return []lineSpec{
			{"base " + name, blue, "", a, value}, {"other " + name, vermillion, "", b, value},
		}
	}
	dashedPair := func(value func(Point) float64, name string) []lineSpec {
		specs := pair(value, name)
		specs[0].dash, specs[1].dash = dashed, dashed
		return specs
	}
	return []lineChart{
		timeChart("cmp-ttft", "TTFT over time, base and other: p50 solid, p99 dashed (ms; "+over+")", "TTFT (ms)", sim,
			append(pair(ttftP50, "p50"), dashedPair(ttftP99, "p99")...)),
		timeChart("cmp-itl", "Inter-token latency over time, base and other: p50 solid, p99 dashed (ms; "+over+")", "ITL (ms)", sim,
			append(pair(itlP50, "p50"), dashedPair(itlP99, "p99")...)),
		timeChart("cmp-queue", "Queue depth over time, base and other: server waiting solid, probe in flight dotted (requests)", "requests", sim,
			append(pair(waiting, "waiting"), []lineSpec{{"base in flight", blue, dotted, a, inFlight}, {"other in flight", vermillion, dotted, b, inFlight}}...)),
	}
}

func ttftP50(p Point) float64  { return p.TTFTP50 }
func ttftP99(p Point) float64  { return p.TTFTP99 }
func itlP50(p Point) float64   { return p.ITLP50 }
func itlP99(p Point) float64   { return p.ITLP99 }
func waiting(p Point) float64  { return p.Waiting }
func inFlight(p Point) float64 { return p.InFlight }

func windowWords(w aggregate.Window) string {
	switch w {
	case aggregate.Win10s:
		return "10 s"
	case aggregate.Win1m:
		return "minute"
	}
	return "5 minutes"
}
