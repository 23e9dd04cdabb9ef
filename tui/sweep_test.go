package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/sweep"
)

// sweepStep is a finished open-loop step: its load, throughput, TTFT p50
// and p99 and ITL p99 in ms, and whether it saturated the server.
func sweepStep(index int, load, ok, ttft50, ttft99, itl99 float64, largest event.Stage, saturated bool) sweep.Step {
	return sweep.Step{
		StepSpec:   sweep.StepSpec{Index: index, Load: sweep.Load{Mode: sweep.OpenLoop, Value: load}},
		Throughput: ok, TokPerSec: 16 * ok, OK: 100,
		TTFT:         aggregate.Stats{Count: 100, P50: ttft50, P99: ttft99},
		ITL:          aggregate.Stats{Count: 1500, P99: itl99},
		HasBreakdown: true, LargestStage: largest,
		Steady: !saturated, Saturated: saturated, Pass: !saturated && ttft99 < 200,
	}
}

// sweepProgress is the acceptance test's sweep of the simulator, with step
// 7 running.
func sweepProgress(t *testing.T) (*sweep.Progress, []aggregate.Objective) {
	t.Helper()
	slo, err := aggregate.ParseSLO("ttft.p99<200ms")
	if err != nil {
		t.Fatal(err)
	}
	steps := []sweep.Step{
		sweepStep(1, 20, 20, 24.2, 29.4, 9.6, event.StagePrefill, false),
		sweepStep(2, 40, 40, 24.8, 29.0, 9.9, event.StagePrefill, false),
		sweepStep(3, 80, 50.5, 805, 1028, 9.9, event.StageQueue, true),
		sweepStep(4, 56.57, 51, 222, 305, 10, event.StageQueue, true),
		sweepStep(5, 47.57, 48, 23.9, 29.2, 9.8, event.StagePrefill, false),
		sweepStep(6, 51.88, 50.5, 112, 183, 10, event.StageQueue, true),
	}
	res := sweep.NewResult(steps, slo)
	res.Stopped = "step 3 (80 req/s) saturated the server"
	live := sweepStep(7, 49.68, 49.9, 23.7, 28.3, 10, event.StagePrefill, false)
	return &sweep.Progress{Result: res, Current: &sweep.Live{Step: live, Phase: sweep.PhaseMeasuring, Elapsed: 2300 * time.Millisecond}}, slo
}

func TestRenderSweep(t *testing.T) {
	st := newStyles(plainRenderer(), true)
	p, slo := sweepProgress(t)
	const w, h = 72, 18
	lines := renderSweep(st, p, slo, w, h)
	if len(lines) != h {
		t.Fatalf("%d lines, want %d", len(lines), h)
	}
	for i, l := range lines {
		if got := ansi.StringWidth(l); got > w {
			t.Errorf("line %d is %d cells wide, over %d: %q", i, got, w, l)
		}
	}
	out := ansi.Strip(strings.Join(lines, "\n"))
	t.Logf("\n%s", out)
	for _, want := range []string{
		"sweep · step 7: 49.68 req/s · measuring 0:02",
		"● TTFT p50", "▲ TTFT p99", "◆ ITL p99", "┄ ttft.p99<200ms", "hollow: running",
		"max load 47.57 req/s (48.0 ok/s)", "knee 51.88 req/s (50.5 ok/s)", "saturation 51.0 ok/s",
		"▴", "knee", "ok/s", "1000┤", "100┤",
		"△", // the running step
	} {
		if !strings.Contains(out, want) {
			t.Errorf("panel lacks %q", want)
		}
	}
	// The SLO line is the row of 200 ms: between the 100 and 1000 ms labels.
	row100, row1000, rowSLO := -1, -1, -1
	for i, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "   100┤"):
			row100 = i
		case strings.HasPrefix(l, "  1000┤"):
			row1000 = i
		}
		if strings.Count(l, "┄") > w/2 {
			rowSLO = i
		}
	}
	if !(row1000 < rowSLO && rowSLO < row100) {
		t.Errorf("SLO line at row %d, want between 1000 ms (%d) and 100 ms (%d)", rowSLO, row1000, row100)
	}
}

func TestRenderSweepSmallAndEmpty(t *testing.T) {
	st := newStyles(plainRenderer(), true)
	p, slo := sweepProgress(t)
	// Too short for a plot: the title and the findings.
	lines := renderSweep(st, p, slo, 60, 4)
	out := ansi.Strip(strings.Join(lines, "\n"))
	if len(lines) != 4 || !strings.Contains(out, "max load") || strings.Contains(out, "┤") {
		t.Errorf("short panel:\n%s", out)
	}
	if renderSweep(st, p, slo, 0, 10) != nil || renderSweep(st, p, slo, 10, 0) != nil {
		t.Error("a panel of no size draws nothing")
	}
	// Before any step has requests.
	empty := &sweep.Progress{Current: &sweep.Live{Step: sweep.Step{StepSpec: sweep.StepSpec{Index: 1, Load: sweep.Load{Mode: sweep.ClosedLoop, Value: 1}}}, Phase: sweep.PhaseWarmup}}
	out = ansi.Strip(strings.Join(renderSweep(st, empty, nil, 60, 12), "\n"))
	if !strings.Contains(out, "step 1: 1 stream · warm-up") || !strings.Contains(out, "no step measured yet") || !strings.Contains(out, "max load -") {
		t.Errorf("empty panel:\n%s", out)
	}
	done := &sweep.Progress{Result: p.Result, Done: true}
	out = ansi.Strip(strings.Join(renderSweep(st, done, slo, 80, 14), "\n"))
	if !strings.Contains(out, "done, 6 steps: step 3 (80 req/s) saturated the server") || strings.Contains(out, "○") {
		t.Errorf("finished panel:\n%s", out)
	}
}

// TestRenderSweepWithoutASuccess: a sweep whose only step had no
// successful request says it failed and why, plots nothing and claims no
// finding: "-" where nothing was measured, not 0.
func TestRenderSweepWithoutASuccess(t *testing.T) {
	st := newStyles(plainRenderer(), true)
	failed := sweep.Step{
		StepSpec: sweep.StepSpec{Index: 1, Load: sweep.Load{Mode: sweep.OpenLoop, Value: 2}},
		Sent:     20, Errors: 20, ErrorRate: 1, ErrorsOver: true,
		Failed: "no request succeeded: http 429",
	}
	res := sweep.NewResult([]sweep.Step{failed}, nil)
	res.Stopped = res.Failure
	out := ansi.Strip(strings.Join(renderSweep(st, &sweep.Progress{Result: res, Done: true}, nil, 100, 12), "\n"))
	for _, want := range []string{"failed: step 1 (2 req/s): no request succeeded: http 429", "no step had a successful request",
		"max load -", "saturation -"} {
		if !strings.Contains(out, want) {
			t.Errorf("panel lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "0 ok/s") || strings.Contains(out, "0.00") {
		t.Errorf("panel shows an unmeasured figure as 0:\n%s", out)
	}
}

// The sweep's header shows the step's clock and the whole sweep's, and
// once the sweep is done, that it finished and how long it took.
func TestSweepHeaderShowsTotalElapsed(t *testing.T) {
	st := newStyles(plainRenderer(), true)
	p, _ := sweepProgress(t)
	p.Result.Steps[0].Start = t0
	fr := Frame{Sweep: p}
	fr.Snapshot.Now = t0.Add(70 * time.Second)
	if got := ansi.Strip(headerTitle(st, &fr, headerState{}, 120)); !strings.Contains(got, "step 0:02 · total 1:10") {
		t.Errorf("running: %q, want the step's and the total clock", got)
	}
	p.Current, p.Done, fr.Finished = nil, true, true
	if got := ansi.Strip(headerTitle(st, &fr, headerState{}, 120)); !strings.Contains(got, "finished 1:10") || !strings.Contains(got, "q quit") {
		t.Errorf("done: %q, want finished 1:10 and q quit", got)
	}
}
