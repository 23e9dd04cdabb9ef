package sweep

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/latscope/latscope/aggregate"
)

// WriteTable prints r for a person: one line per step by load (latencies in
// milliseconds), the max load, knee and saturation, and why each step ended.
// A report of the sweep's recording shows the same lines (Heading,
// TableColumns, TableRows, Findings, StepLines).
func WriteTable(w io.Writer, r Result) error {
	b := &strings.Builder{}
	for _, l := range r.Heading() {
		b.WriteString(l + "\n")
	}
	b.WriteString("\n")

	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(TableColumns, "\t")+"\t")
	for _, row := range r.TableRows() {
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write sweep table: %w", err)
	}

	b.WriteString("\n")
	for _, l := range r.Findings() {
		b.WriteString(l + "\n")
	}
	b.WriteString("\nSteps, in the order they ran:\n")
	for _, l := range r.StepLines() {
		b.WriteString("  " + l + "\n")
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write sweep table: %w", err)
	}
	return nil
}

// Heading is the table's first lines: the mode, the steps and the SLO, why
// the sweep stopped, and why it failed, if it did.
func (r Result) Heading() []string {
	first := fmt.Sprintf("Sweep: %s, %d steps", modeText(r.Mode, r.Arrival), len(r.Steps))
	if r.SLO != "" {
		first += ", SLO " + r.SLO
	}
	out := []string{first, "Stopped: " + r.Stopped}
	if r.Failure != "" {
		out = append(out, "Failed: "+r.Failure)
	}
	return out
}

// TableColumns head the table of steps.
var TableColumns = []string{"step", "load", "offered/s", "ok/s", "tok/s", "TTFT p50", "p90", "p99", "ITL p99", "TPOT p50", "E2E p99", "queue share", "queue depth", "errors", "steady", "result"}

// TableRows are the table's rows: one per step that was not interrupted,
// by load; a figure the step did not measure shows as "-", not as a 0.
func (r Result) TableRows() [][]string {
	var rows [][]string
	for _, i := range r.byLoad() {
		s := &r.Steps[i]
		rate := func(v float64, format string) string { return figure(s.Measured > 0, format, v) }
		ms := func(st aggregate.Stats, v float64) string { return figure(st.Count > 0, "%.2f", v) }
		rows = append(rows, []string{
			strconv.Itoa(s.Index), s.Load.String(), rate(s.Offered, "%.1f"), rate(s.Throughput, "%.1f"), rate(s.TokPerSec, "%.0f"),
			ms(s.TTFT, s.TTFT.P50), ms(s.TTFT, s.TTFT.P90), ms(s.TTFT, s.TTFT.P99), ms(s.ITL, s.ITL.P99), ms(s.TPOT, s.TPOT.P50), ms(s.E2E, s.E2E.P99),
			queueShareText(s), queueDepthText(s), figure(s.Sent > 0, "%.1f%%", 100*s.ErrorRate), yesNo(s.Steady), s.Verdict(),
		})
	}
	return rows
}

// Findings are the sweep's answer: the max load, knee and saturation (or
// why there is none), then its notes.
func (r Result) Findings() []string {
	none := "none"
	if len(r.Steps) > 0 && !r.anySuccess() {
		none = "none (" + NoSuccessNote + ")"
	}
	out := []string{findingLine("Max load", r.MaxLoad, none), findingLine("Knee", r.Knee, none), findingLine("Saturation", r.Saturation, none)}
	for _, n := range r.Notes {
		out = append(out, "Note: "+n)
	}
	return out
}

// StepLines say why each step ended, in the order they ran.
func (r Result) StepLines() []string {
	out := make([]string, 0, len(r.Steps))
	for _, s := range r.Steps {
		out = append(out, fmt.Sprintf("%d  %s, measured %.1f s: %s", s.Index, s.Load, s.Measured.Seconds(), s.Reason))
	}
	return out
}

func modeText(m Mode, arrival string) string {
	switch {
	case m == ClosedLoop:
		return "closed loop (concurrency)"
	case arrival != "":
		return "open loop (rate, " + arrival + " arrivals)"
	}
	return "open loop (rate)"
}

func findingLine(name string, f *Finding, none string) string {
	if f == nil {
		return fmt.Sprintf("%s: %s", name, none)
	}
	return fmt.Sprintf("%s: %s (step %d): %.1f ok/s, %.0f tok/s - %s", name, f.Load, f.Step, f.Throughput, f.TokPerSec, f.Why)
}

// figure formats v, or "-" when it was not measured.
func figure(measured bool, format string, v float64) string {
	if !measured {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

func queueShareText(s *Step) string {
	if !s.HasBreakdown {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*s.QueueShare)
}

func queueDepthText(s *Step) string {
	if !s.HasQueueDepth {
		return "-"
	}
	return fmt.Sprintf("%.1f", s.QueueDepth)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// WriteJSON prints r as one JSON object: mode, slo, steps (each with its
// statistics, signals and verdict; latencies in milliseconds), max_load,
// knee, saturation (null when none), stopped, notes, and curve (throughput
// against latency, by load).
func WriteJSON(w io.Writer, r Result) error {
	out := struct {
		Result
		Curve []CurvePoint `json:"curve"`
	}{r, r.Curve()}
	if out.Steps == nil {
		out.Steps = []Step{}
	}
	if out.Curve == nil {
		out.Curve = []CurvePoint{}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the sweep as JSON: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write the sweep as JSON: %w", err)
	}
	return nil
}
