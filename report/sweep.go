package report

import (
	"fmt"
	"math"
	"strconv"

	"github.com/latscope/latscope/sweep"
)

// A sweep's recording carries its rules and steps (sweep's markers), so the
// report judges the steps again as the live sweep did (sweepjudge.Recorded) and
// shows what `latscope sweep` printed at its end: the answer (max load,
// knee, saturation), the table of steps by load and why each ended.

// sweepTable is the sweep's answer and its steps, in sweep's own words.
func sweepTable(r *sweep.Result) table {
	head := r.Heading()
	t := table{Title: head[0], Columns: sweep.TableColumns, Rows: r.TableRows(), Items: r.Findings(), Notes: head[1:]}
	if lines := r.StepLines(); len(lines) > 0 {
		t.Notes = append(t.Notes, "Steps, in the order they ran:")
		t.Notes = append(t.Notes, lines...)
	}
	return t
}

// sweepJSON is the sweep as `latscope sweep --json` prints it.
type sweepJSON struct {
	sweep.Result
	Curve []sweep.CurvePoint `json:"curve"`
}

func sweepJSONOf(r *sweep.Result) *sweepJSON {
	if r == nil {
		return nil
	}
	out := &sweepJSON{Result: *r, Curve: r.Curve()}
	if out.Steps == nil {
		out.Steps = []sweep.Step{}
	}
	if out.Curve == nil {
		out.Curve = []sweep.CurvePoint{}
	}
	return out
}

// sweepRows are the sweep's steps and answer as CSV rows: a step's figures
// under section sweep_step named by its index, the answer under section
// sweep named max_load, knee and saturation. A figure the step did not
// measure has no row.
func sweepRows(rows *csvRows, r *sweep.Result) {
	if r == nil {
		return
	}
	for _, s := range r.Steps {
		name := strconv.Itoa(s.Index)
		rows.add("sweep_step", name, "load", s.Load.Value, loadUnit(s.Load), "")
		rows.add("sweep_step", name, "interrupted", boolNum(s.Interrupted), "bool", "")
		if s.Measured > 0 {
			rows.add("sweep_step", name, "measured", s.Measured.Seconds(), "s", "")
			rows.add("sweep_step", name, "offered_per_s", s.Offered, "req/s", "")
			rows.add("sweep_step", name, "ok_per_s", s.Throughput, "req/s", "")
			rows.add("sweep_step", name, "tok_per_s", s.TokPerSec, "tok/s", "")
		}
		for _, st := range []struct {
			stat  string
			count int64
			v     float64
		}{{"ttft_p50", s.TTFT.Count, s.TTFT.P50}, {"ttft_p90", s.TTFT.Count, s.TTFT.P90}, {"ttft_p99", s.TTFT.Count, s.TTFT.P99},
			{"itl_p99", s.ITL.Count, s.ITL.P99}, {"tpot_p50", s.TPOT.Count, s.TPOT.P50}, {"e2e_p99", s.E2E.Count, s.E2E.P99}} {
			if st.count > 0 {
				rows.add("sweep_step", name, st.stat, st.v, "ms", "")
			}
		}
		if s.HasBreakdown {
			rows.add("sweep_step", name, "queue_share", 100*s.QueueShare, "%", "")
		}
		if s.HasQueueDepth {
			rows.add("sweep_step", name, "queue_depth", s.QueueDepth, "requests", "")
		}
		if s.Sent > 0 {
			rows.add("sweep_step", name, "error_rate", 100*s.ErrorRate, "%", "")
		}
		rows.add("sweep_step", name, "steady", boolNum(s.Steady), "bool", "")
		rows.add("sweep_step", name, "pass", boolNum(s.Pass), "bool", "")
	}
	for _, f := range []struct {
		name string
		f    *sweep.Finding
	}{{"max_load", r.MaxLoad}, {"knee", r.Knee}, {"saturation", r.Saturation}} {
		if f.f == nil {
			continue
		}
		rows.add("sweep", f.name, "load", f.f.Load.Value, loadUnit(f.f.Load), "")
		rows.add("sweep", f.name, "step", float64(f.f.Step), "step", "")
		rows.add("sweep", f.name, "ok_per_s", f.f.Throughput, "req/s", "")
		rows.add("sweep", f.name, "tok_per_s", f.f.TokPerSec, "tok/s", "")
	}
}

func loadUnit(l sweep.Load) string {
	if l.Mode == sweep.ClosedLoop {
		return "streams"
	}
	return "req/s"
}

// sweepCurveChart is the sweep's curve: latency against achieved
// throughput, one point per step by load (sweep's Curve), with the max
// load and the knee marked where sweep found them.
func sweepCurveChart(r *sweep.Result, simulated bool) xyChart {
	curve := r.Curve()
	anyTokens := false
	for _, p := range curve {
		anyTokens = anyTokens || p.TokPerSec > 0
	}
	xLabel, unit, tokens := throughputAxis(anyTokens)
	xOf := func(okPerSec, tokPerSec float64) float64 {
		if tokens {
			return tokPerSec
		}
		return okPerSec
	}
	points := make([]xyPoint, 0, len(curve))
	for _, p := range curve {
		x := xOf(p.Throughput, p.TokPerSec)
		points = append(points, xyPoint{x: x, ys: []float64{orNaN(p.TTFTP50), orNaN(p.TTFTP99), orNaN(p.ITLP99)}, class: "step",
			step: strconv.Itoa(p.Step), title: fmt.Sprintf("step %d (%s): %s %s, %s ok/s; TTFT p50 %s ms, p99 %s ms; ITL p99 %s ms; %s",
				p.Step, p.Load, num(x, 1), unit, num(p.Throughput, 2), num(orNaN(p.TTFTP50), 1), num(orNaN(p.TTFTP99), 1),
				num(orNaN(p.ITLP99), 2), verdictOf(r, p.Step))})
	}
	c := xyPlot("sweep-curve", "Latency against throughput: TTFT p50 and p99, ITL p99, one point per step of the sweep (ms)", xLabel,
		"latency (ms)", simulated, []xySeries{ttftP50Series, ttftP99Series, itlP99Series}, points, true)
	c.Note = "Each step is one point, joined in order of load. The solid vertical line marks the max load, the dashed one the knee, as the sweep found them; the table below says why."
	for _, f := range []struct {
		class, name, dash string
		f                 *sweep.Finding
	}{{"max-load", "max load", "", r.MaxLoad}, {"knee", "knee", "6 4", r.Knee}} {
		if f.f == nil {
			c.Note += " The sweep found no " + f.name + "."
			continue
		}
		ring := math.NaN()
		if s := r.Step(f.f.Step); s != nil && s.TTFT.Count > 0 {
			ring = s.TTFT.P99
		}
		x := xOf(f.f.Throughput, f.f.TokPerSec)
		c.mark(f.class, strconv.Itoa(f.f.Step), fmt.Sprintf("%s: %s (step %d)", f.name, f.f.Load, f.f.Step),
			fmt.Sprintf("%s: step %d, %s, %s %s: %s", f.name, f.f.Step, f.f.Load, num(x, 1), unit, f.f.Why), f.dash, x, ring)
	}
	return c
}

func orNaN(v *float64) float64 {
	if v == nil {
		return math.NaN()
	}
	return *v
}

// verdictOf is the step's verdict in sweep's words (its table's result
// column).
func verdictOf(r *sweep.Result, index int) string {
	if s := r.Step(index); s != nil {
		return "result: " + s.Verdict()
	}
	return ""
}
