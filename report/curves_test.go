package report

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/sweep"
)

// curveSteps is a closed-loop sweep of 1 to 16 streams: throughput grows
// up to 8 streams and stalls at 16 (saturated); queue wait leads TTFT
// from 4 streams on, with requests waiting in the server's queue. So the
// knee is step 3 (4 streams) and the max load step 4 (8 streams).
func curveSteps() []sweep.Step {
	type row struct {
		streams, okPerSec, ttftP50, ttftP99, itlP99, queueDepth float64
		queueLeads, saturated                                   bool
	}
	rows := []row{
		{1, 10, 40, 60, 12, 0, false, false},
		{2, 19, 45, 70, 13, 0, false, false},
		{4, 35, 70, 120, 15, 1.5, true, false},
		{8, 52, 150, 300, 20, 6, true, false},
		{16, 53, 420, 900, 24, 20, true, true},
	}
	steps := make([]sweep.Step, 0, len(rows))
	for i, r := range rows {
		largest := event.StagePrefill
		if r.queueLeads {
			largest = event.StageQueue
		}
		steps = append(steps, sweep.Step{
			StepSpec: sweep.StepSpec{Index: i + 1, Load: sweep.Load{Mode: sweep.ClosedLoop, Value: r.streams}},
			Measured: 20 * time.Second, Offered: r.okPerSec, Throughput: r.okPerSec, TokPerSec: 32 * r.okPerSec,
			Sent: int64(20 * r.okPerSec), OK: int64(20 * r.okPerSec),
			TTFT:         aggregate.Stats{Count: 100, P50: r.ttftP50, P90: r.ttftP99 * 0.9, P99: r.ttftP99},
			ITL:          aggregate.Stats{Count: 3000, P50: 10, P99: r.itlP99},
			HasBreakdown: true, LargestStage: largest, QueueShare: 0.6,
			HasQueueDepth: true, QueueDepth: r.queueDepth,
			Steady: !r.saturated, Saturated: r.saturated, Pass: !r.saturated,
		})
	}
	return steps
}

// chartNode returns the SVG whose title id is id+"-title".
func chartNode(t *testing.T, doc *html.Node, id string) *html.Node {
	t.Helper()
	var found *html.Node
	walk(doc, func(n *html.Node) {
		if n.Data == "svg" && attr(n, "aria-labelledby") == id+"-title" {
			found = n
		}
	})
	if found == nil {
		t.Fatalf("no %s chart", id)
	}
	return found
}

// groups returns the <g> elements of class under n.
func groups(n *html.Node, class string) []*html.Node {
	var out []*html.Node
	walk(n, func(g *html.Node) {
		if g.Data == "g" && attr(g, "class") == class {
			out = append(out, g)
		}
	})
	return out
}

// titleOf is the text of n's <title> child.
func titleOf(n *html.Node) string {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && c.Data == "title" && c.FirstChild != nil {
			return c.FirstChild.Data
		}
	}
	return ""
}

// textOf is all the text under n.
func textOf(n *html.Node) string {
	var b strings.Builder
	walk(n, func(e *html.Node) {
		for c := e.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.TextNode {
				b.WriteString(c.Data + "\n")
			}
		}
	})
	return b.String()
}

// markerX is the centre x of the first marker (a circle, TTFT p50) of a
// step's or window's group: its path starts 4.5 left of the centre.
func markerX(t *testing.T, g *html.Node) float64 {
	t.Helper()
	var d string
	walk(g, func(n *html.Node) {
		if n.Data == "path" && d == "" {
			d = attr(n, "d")
		}
	})
	x, err := strconv.ParseFloat(strings.Fields(strings.TrimPrefix(d, "M"))[0], 64)
	if err != nil {
		t.Fatalf("marker path %q: %v", d, err)
	}
	return x + 4.5
}

// TestSweepCurveMarksKneeAndMaxLoad: a sweep's report draws latency
// against throughput, one point per step, with the knee and the max load
// that sweep found marked at their steps.
func TestSweepCurveMarksKneeAndMaxLoad(t *testing.T) {
	t.Parallel()
	res := sweep.NewResult(curveSteps(), nil)
	if res.Knee == nil || res.Knee.Step != 3 || res.MaxLoad == nil || res.MaxLoad.Step != 4 {
		t.Fatalf("the synthetic sweep: knee %+v, max load %+v; want steps 3 and 4", res.Knee, res.MaxLoad)
	}
	rec := defaultSynth(1).load(t)
	rec.Sweep = &res
	page := renderHTML(t, rec)
	doc := checkOffline(t, page)
	checkSVGsAreXML(t, page)
	curve := chartNode(t, doc, "sweep-curve")

	text := textOf(curve)
	for _, want := range []string{"achieved output throughput (tokens/s)", "latency (ms)", "TTFT p50", "TTFT p99", "ITL p99",
		"max load: 8 streams (step 4)", "knee: 4 streams (step 3)", "SIMULATED"} {
		if !strings.Contains(text, want) {
			t.Errorf("the sweep's curve lacks %q", want)
		}
	}
	stepX := map[string]float64{}
	for _, g := range groups(curve, "step") {
		stepX[attr(g, "data-step")] = markerX(t, g)
		if n := strings.Count(renderNode(t, g), "<path"); n != 3 {
			t.Errorf("step %s has %d markers, want 3 (TTFT p50, p99, ITL p99)", attr(g, "data-step"), n)
		}
	}
	if len(stepX) != 5 {
		t.Fatalf("%d steps drawn, want 5: %v", len(stepX), stepX)
	}
	if !(stepX["1"] < stepX["2"] && stepX["2"] < stepX["3"] && stepX["3"] < stepX["4"] && stepX["4"] < stepX["5"]) {
		t.Errorf("the steps' throughputs do not grow along x: %v", stepX)
	}
	lines := 0
	walk(curve, func(n *html.Node) {
		if n.Data == "path" && attr(n, "class") == "curve" && strings.Count(attr(n, "d"), "L") == 4 {
			lines++
		}
	})
	if lines != 3 {
		t.Errorf("%d lines through the 5 steps, want 3", lines)
	}

	for class, want := range map[string]struct {
		step, title string
	}{"knee": {"3", "knee: step 3, 4 streams"}, "max-load": {"4", "max load: step 4, 8 streams"}} {
		marks := groups(curve, class)
		if len(marks) != 1 {
			t.Errorf("%d %s marks, want 1", len(marks), class)
			continue
		}
		m := marks[0]
		if got := attr(m, "data-step"); got != want.step {
			t.Errorf("%s marked at step %s, want %s", class, got, want.step)
		}
		if title := titleOf(m); !strings.HasPrefix(title, want.title) {
			t.Errorf("%s mark's title %q, want it to start %q", class, title, want.title)
		}
		var x1 float64
		walk(m, func(n *html.Node) {
			if n.Data == "line" {
				x1, _ = strconv.ParseFloat(attr(n, "x1"), 64)
			}
		})
		if math.Abs(x1-stepX[want.step]) > 0.06 {
			t.Errorf("%s line at x %.1f, its step's point at %.1f", class, x1, stepX[want.step])
		}
	}
	if i, j := strings.Index(page, `id="sweep-curve-title"`), strings.Index(page, `id="breakdown-title"`); i < 0 || i > j {
		t.Error("the sweep's curve is not the first chart of the page")
	}
}

// TestSweepCurveWithoutKnee: a sweep with no knee says so under its curve
// and marks none.
func TestSweepCurveWithoutKnee(t *testing.T) {
	t.Parallel()
	steps := curveSteps()
	for i := range steps {
		steps[i].LargestStage = event.StagePrefill
	}
	res := sweep.NewResult(steps, nil)
	if res.Knee != nil || res.MaxLoad == nil {
		t.Fatalf("knee %+v, max load %+v; want no knee and a max load", res.Knee, res.MaxLoad)
	}
	rec := defaultSynth(1).load(t)
	rec.Sweep = &res
	page := renderHTML(t, rec)
	curve := chartNode(t, checkOffline(t, page), "sweep-curve")
	if n := len(groups(curve, "knee")); n != 0 {
		t.Errorf("%d knee marks in a sweep without a knee", n)
	}
	if n := len(groups(curve, "max-load")); n != 1 {
		t.Errorf("%d max-load marks, want 1", n)
	}
	if !strings.Contains(page, "The sweep found no knee.") {
		t.Error("the curve's note does not say the sweep found no knee")
	}
}

// TestRunLatencyThroughput: a run's report plots TTFT against throughput,
// one point per window of the series, no two windows overlapping; and the
// load over time on the TTFT chart's time axis.
func TestRunLatencyThroughput(t *testing.T) {
	t.Parallel()
	rec := defaultSynth(1).load(t)
	windows := windowPoints(rec.Series)
	if len(windows) != 6 {
		t.Fatalf("%d windows of %v in a 60 s run, want 6", len(windows), rec.Series.Window.Span())
	}
	for i := 1; i < len(windows); i++ {
		if gap := windows[i].At - windows[i-1].At; gap < rec.Series.Window.Span() {
			t.Errorf("windows at %v and %v overlap", windows[i-1].At, windows[i].At)
		}
	}
	page := renderHTML(t, rec)
	doc := checkOffline(t, page)
	checkSVGsAreXML(t, page)
	chart := chartNode(t, doc, "run-latency-throughput")
	points := groups(chart, "window")
	if len(points) != len(windows) {
		t.Errorf("%d points, want one per window: %d", len(points), len(windows))
	}
	for i, g := range points {
		if i < len(windows) && !strings.HasPrefix(titleOf(g), tickLabel(max(windows[i].At-10*time.Second, 0).Seconds())+" to "+tickLabel(windows[i].At.Seconds())+" s: ") {
			t.Errorf("point %d's title %q, want its window %v", i, titleOf(g), windows[i].At)
		}
	}
	text := textOf(chart)
	for _, want := range []string{"achieved output throughput (tokens/s)", "TTFT (ms)", "TTFT p50", "TTFT p99"} {
		if !strings.Contains(text, want) {
			t.Errorf("the latency-throughput chart lacks %q", want)
		}
	}

	load := chartNode(t, doc, "run-load")
	if !strings.Contains(textOf(load), "completed (ok/s)") || !strings.Contains(textOf(load), "req/s") {
		t.Error("the load chart lacks its line's name or its unit")
	}
	charts := timeCharts("run", rec)
	if charts[0].ID != "run-ttft" || charts[2].ID != "run-load" {
		t.Fatalf("charts %s, %s", charts[0].ID, charts[2].ID)
	}
	if a, b := charts[0], charts[2]; a.Left != b.Left || a.Right != b.Right || len(a.XTicks) != len(b.XTicks) || a.XTicks[len(a.XTicks)-1] != b.XTicks[len(b.XTicks)-1] {
		t.Error("the load chart's time axis does not line up with the TTFT chart's")
	}
}

func renderNode(t *testing.T, n *html.Node) string {
	t.Helper()
	var b strings.Builder
	if err := html.Render(&b, n); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
