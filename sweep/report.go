package sweep

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/latscope/latscope/aggregate"
)

// WriteTable prints r for a person: one line per step by load (latencies in
// milliseconds), the max load, knee and saturation, and why each step ended.
func WriteTable(w io.Writer, r Result) error {
	b := &strings.Builder{}
	fmt.Fprintf(b, "Sweep: %s, %d steps", modeText(r.Mode, r.Arrival), len(r.Steps))
	if r.SLO != "" {
		fmt.Fprintf(b, ", SLO %s", r.SLO)
	}
	fmt.Fprintf(b, "\nStopped: %s\n", r.Stopped)
	if r.Failure != "" {
		fmt.Fprintf(b, "Failed: %s\n", r.Failure)
	}
	b.WriteString("\n")

	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "step\tload\toffered/s\tok/s\ttok/s\tTTFT p50\tp90\tp99\tITL p99\tTPOT p50\tE2E p99\tqueue share\tqueue depth\terrors\tsteady\tresult\t")
	for _, i := range r.byLoad() {
		s := &r.Steps[i]
		// A figure the step did not measure shows as "-", not as a 0.
		rate := func(v float64, format string) string { return figure(s.Measured > 0, format, v) }
		ms := func(st aggregate.Stats, v float64) string { return figure(st.Count > 0, "%.2f", v) }
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			s.Index, s.Load, rate(s.Offered, "%.1f"), rate(s.Throughput, "%.1f"), rate(s.TokPerSec, "%.0f"),
			ms(s.TTFT, s.TTFT.P50), ms(s.TTFT, s.TTFT.P90), ms(s.TTFT, s.TTFT.P99), ms(s.ITL, s.ITL.P99), ms(s.TPOT, s.TPOT.P50), ms(s.E2E, s.E2E.P99),
			queueShareText(s), queueDepthText(s), figure(s.Sent > 0, "%.1f%%", 100*s.ErrorRate), yesNo(s.Steady), s.Verdict())
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write sweep table: %w", err)
	}

	b.WriteString("\n")
	none := "none"
	if len(r.Steps) > 0 && !r.anySuccess() {
		none = "none (" + NoSuccessNote + ")"
	}
	writeFinding(b, "Max load", r.MaxLoad, none)
	writeFinding(b, "Knee", r.Knee, none)
	writeFinding(b, "Saturation", r.Saturation, none)
	for _, n := range r.Notes {
		fmt.Fprintf(b, "Note: %s\n", n)
	}
	b.WriteString("\nSteps, in the order they ran:\n")
	for _, s := range r.Steps {
		fmt.Fprintf(b, "  %d  %s, measured %.1f s: %s\n", s.Index, s.Load, s.Measured.Seconds(), s.Reason)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write sweep table: %w", err)
	}
	return nil
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

func writeFinding(b *strings.Builder, name string, f *Finding, none string) {
	if f == nil {
		fmt.Fprintf(b, "%s: %s\n", name, none)
		return
	}
	fmt.Fprintf(b, "%s: %s (step %d): %.1f ok/s, %.0f tok/s - %s\n", name, f.Load, f.Step, f.Throughput, f.TokPerSec, f.Why)
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

// Verdict is the step's result in a word or two: pass, saturated, errors,
// no success (not one request succeeded), interrupted or fail.
func (s *Step) Verdict() string {
	switch {
	case s.Interrupted:
		return "interrupted"
	case s.Failed != "":
		return "no success"
	case s.Pass:
		return "pass"
	case s.Saturated:
		return "saturated"
	case s.ErrorsOver:
		return "errors"
	}
	return "fail"
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
