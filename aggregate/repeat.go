package aggregate

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/latscope/latscope/internal/stats"
)

// RepeatAlpha is the level of repeated runs' statistics: their confidence
// intervals are 1 − RepeatAlpha (95 %), and a comparison of two sets of runs
// calls a change significant when p stays below it after Holm-Bonferroni
// correction over the quantities tested.
const RepeatAlpha = 0.05

// RepeatRule says, in the output, how a comparison of repeated runs
// decides what is significant.
const RepeatRule = "Welch's t-test (two-sided) on each quantity's per-run values; " +
	"significant when p stays at or below 0.05 after Holm-Bonferroni correction over every quantity tested (the p shown)"

// HeadlineValue is one headline figure of one run. OK is false when the
// run has none (no request succeeded, so no TTFT; no --slo, so no goodput).
type HeadlineValue struct {
	Name  string // stable key, e.g. ttft_p50_ms
	Label string // for people, e.g. TTFT p50
	Unit  string // ms, tok/s, req/s, %
	Value float64
	OK    bool
}

// Headline is the run's headline figures, in a fixed order: TTFT (on the
// run's --ttft-basis), ITL and E2E at p50 and p99, output tokens and
// finished requests per second, the error rate, and the goodput when the
// run had objectives.
func Headline(s Summary) []HeadlineValue {
	lat := func(name, label string, st Stats, p float64) HeadlineValue {
		return HeadlineValue{Name: name, Label: label, Unit: "ms", Value: p, OK: st.Count > 0}
	}
	ttft := s.TTFTFor()
	r := s.Requests
	errRate, finished := r.ErrorRate()
	out := []HeadlineValue{
		lat("ttft_p50_ms", "TTFT p50", ttft, ttft.P50),
		lat("ttft_p99_ms", "TTFT p99", ttft, ttft.P99),
		lat("itl_p50_ms", "ITL p50", s.ITL, s.ITL.P50),
		lat("itl_p99_ms", "ITL p99", s.ITL, s.ITL.P99),
		lat("e2e_p50_ms", "E2E p50", s.E2E, s.E2E.P50),
		lat("e2e_p99_ms", "E2E p99", s.E2E, s.E2E.P99),
		{Name: "tok_per_s", Label: "output tok/s", Unit: "tok/s", Value: r.TokPerSec, OK: finished},
		{Name: "req_per_s", Label: "req/s", Unit: "req/s", Value: r.ReqPerSec, OK: finished},
		{Name: "error_rate_pct", Label: "error rate", Unit: "%", Value: 100 * errRate, OK: finished},
	}
	if r.GoodPerSec != nil {
		out = append(out, HeadlineValue{Name: "goodput_per_s", Label: "goodput", Unit: "req/s", Value: *r.GoodPerSec, OK: finished})
	}
	for i := range out {
		if v := out[i].Value; math.IsNaN(v) || math.IsInf(v, 0) {
			out[i].OK = false
		}
	}
	return out
}

// RepeatedQuantity is one headline quantity over repeated runs: its
// per-run values (the runs that had it), their mean, sample standard
// deviation and the 95 % confidence interval of the mean from Student's t
// with N−1 degrees of freedom. With fewer than two values there is no
// spread: Stddev and the interval are NaN (null in JSON).
type RepeatedQuantity struct {
	Name   string    `json:"name"`
	Label  string    `json:"label"`
	Unit   string    `json:"unit"`
	Values []float64 `json:"values"`
	N      int       `json:"n"`
	Mean   float64   `json:"mean"`
	Stddev float64   `json:"stddev"`
	Low    float64   `json:"ci95_low"`
	High   float64   `json:"ci95_high"`
}

// NewRepeatedQuantity computes the statistics of values.
func NewRepeatedQuantity(name, label, unit string, values []float64) RepeatedQuantity {
	q := RepeatedQuantity{Name: name, Label: label, Unit: unit, Values: values, N: len(values),
		Mean: math.NaN(), Stddev: math.NaN(), Low: math.NaN(), High: math.NaN()}
	switch {
	case q.N == 1:
		q.Mean = values[0]
	case q.N >= 2:
		mean, variance := stats.MeanVar(values)
		q.Mean, q.Stddev = mean, math.Sqrt(variance)
		half := stats.TCritical(float64(q.N-1), RepeatAlpha) * q.Stddev / math.Sqrt(float64(q.N))
		q.Low, q.High = mean-half, mean+half
	}
	return q
}

// Repeated is a benchmark run several times: each run's headline and, per
// headline quantity, the statistics over the runs.
type Repeated struct {
	Runs       [][]HeadlineValue  `json:"-"`
	Quantities []RepeatedQuantity `json:"headline"`
}

// Repeat derives the statistics of runs, each given by its summary.
func Repeat(runs []Summary) Repeated {
	rep := Repeated{}
	for _, s := range runs {
		rep.Runs = append(rep.Runs, Headline(s))
	}
	rep.Quantities = repeatedQuantities(rep.Runs)
	return rep
}

// repeatedQuantities gathers each quantity's values over the runs, in the
// order of first appearance; a quantity no run has is left out.
func repeatedQuantities(runs [][]HeadlineValue) []RepeatedQuantity {
	var order []HeadlineValue
	values := map[string][]float64{}
	for _, run := range runs {
		for _, h := range run {
			if _, seen := values[h.Name]; !seen {
				order = append(order, h)
				values[h.Name] = nil
			}
			if h.OK {
				values[h.Name] = append(values[h.Name], h.Value)
			}
		}
	}
	var out []RepeatedQuantity
	for _, h := range order {
		if vs := values[h.Name]; len(vs) > 0 {
			out = append(out, NewRepeatedQuantity(h.Name, h.Label, h.Unit, vs))
		}
	}
	return out
}

// MarshalJSON rounds the figures to microseconds (of a millisecond
// quantity) and writes what is undefined as null.
func (q RepeatedQuantity) MarshalJSON() ([]byte, error) {
	num := func(v float64) *float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		r := round3(v)
		return &r
	}
	values := make([]float64, len(q.Values))
	for i, v := range q.Values {
		values[i] = round3(v)
	}
	return json.Marshal(struct {
		Name   string    `json:"name"`
		Label  string    `json:"label"`
		Unit   string    `json:"unit"`
		Values []float64 `json:"values"`
		N      int       `json:"n"`
		Mean   *float64  `json:"mean"`
		Stddev *float64  `json:"stddev"`
		Low    *float64  `json:"ci95_low"`
		High   *float64  `json:"ci95_high"`
	}{q.Name, q.Label, q.Unit, values, q.N, num(q.Mean), num(q.Stddev), num(q.Low), num(q.High)})
}

// WriteRepeatedJSON prints the runs and their statistics as one JSON
// object {"runs": [...], "repeated": {"headline": [...]}}. runs are the
// runs' summaries as WriteJSON wrote them, passed through untouched.
func WriteRepeatedJSON(w io.Writer, runs []json.RawMessage, rep Repeated) error {
	if runs == nil {
		runs = []json.RawMessage{}
	}
	if rep.Quantities == nil {
		rep.Quantities = []RepeatedQuantity{}
	}
	b, err := json.MarshalIndent(struct {
		Runs     []json.RawMessage `json:"runs"`
		Repeated Repeated          `json:"repeated"`
	}{runs, rep}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the repeated runs as JSON: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write the repeated runs' JSON: %w", err)
	}
	return nil
}

// HeadlineLine is one run's headline on one line.
func HeadlineLine(h []HeadlineValue) string {
	parts := make([]string, 0, len(h))
	for _, v := range h {
		text := "-"
		if v.OK {
			text = formatQuantity(v.Value, v.Unit)
		}
		parts = append(parts, v.Label+" "+text)
	}
	return strings.Join(parts, " · ")
}

// WriteRepeatedTable prints each run's headline line, then per quantity
// its mean, 95 % confidence interval and the number of runs it is over.
func WriteRepeatedTable(w io.Writer, rep Repeated) error {
	ew := &errWriter{w: w}
	for i, run := range rep.Runs {
		ew.printf("run %d: %s\n", i+1, HeadlineLine(run))
	}
	ew.printf("\nOver %d runs (mean; 95%% confidence interval of the mean, Student's t over the runs):\n", len(rep.Runs))
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  quantity\tmean\t95% CI\truns")
	for _, q := range rep.Quantities {
		ci := "- (one run)"
		if !math.IsNaN(q.Low) {
			ci = formatQuantity(q.Low, "") + " – " + formatQuantity(q.High, q.Unit)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\n", q.Label, formatQuantity(q.Mean, q.Unit), ci, q.N)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the repeated runs' table: %w", err)
	}
	return ew.err
}

// formatQuantity prints v with about four significant digits, and its unit.
func formatQuantity(v float64, unit string) string {
	var s string
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		s = "-"
	case a >= 1000 || a == 0:
		s = fmt.Sprintf("%.0f", v)
	case a >= 100:
		s = fmt.Sprintf("%.1f", v)
	case a >= 10:
		s = fmt.Sprintf("%.2f", v)
	default:
		s = fmt.Sprintf("%.3f", v)
	}
	switch unit {
	case "":
		return s
	case "%":
		return s + "%"
	}
	return s + " " + unit
}
