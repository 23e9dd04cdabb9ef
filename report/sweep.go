package report

import (
	"strconv"

	"github.com/latscope/latscope/sweep"
)

// A sweep's recording carries its rules and steps (sweep's markers), so the
// report judges the steps again as the live sweep did (sweep.Recorded) and
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
