package aggregate

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Objective is one service-level objective, e.g. ttft.p99<500ms.
type Objective struct {
	Metric string  // "ttft.p99", "errors.rate", "requests.ok", ...
	Op     string  // "<", "<=", ">", ">="
	Value  float64 // milliseconds for latencies, a fraction (0..1) for errors.rate, a count for requests.ok
	Text   string  // the value as written, e.g. "500ms" or "1%"
}

// String returns the objective as it would be written.
func (o Objective) String() string { return o.Metric + o.Op + o.Text }

// SLOResult is one objective checked against a run.
type SLOResult struct {
	Objective Objective
	Metric    string  // as in the objective
	Want      string  // e.g. "<500ms"
	Got       float64 // same unit as Objective.Value; NaN when there was no data
	GotText   string  // e.g. "412.30ms", "0.50%", "no data", or why the objective is invalid
	// Judged is true when the scope had a value to compare: not without
	// data, not for an invalid objective, not for requests.ok over a
	// window shorter than the run.
	Judged bool
	Pass   bool // false unless Judged
}

// Broken reports whether the objective was judged and missed: what a
// breach marker or a red table cell claims.
func (r SLOResult) Broken() bool { return r.Judged && !r.Pass }

// The latency metrics and their statistics an SLO may name.
func sloLatencyMetric(name string) bool {
	switch name {
	case "ttft", "itl", "tpot", "e2e":
		return true
	}
	return false
}

func sloStat(name string) bool {
	switch name {
	case "mean", "min", "p50", "p90", "p95", "p99", "p99.9", "max":
		return true
	}
	return false
}

// maxSLOSpec bounds the spec's length; a real one is a few dozen bytes.
const maxSLOSpec = 4096

// ParseSLO parses a comma-separated list of objectives such as
// "ttft.p99<500ms,itl.p99<50ms,e2e.mean<=2s,errors.rate<1%,requests.ok>=100".
// Latency metrics are ttft, itl, tpot and e2e with mean, min, p50, p90, p95, p99, p99.9 or max,
// compared with a duration (500ms, 2s); errors.rate takes a percentage (1%)
// or a fraction (0.01); requests.ok takes a count. An empty spec means no
// objectives.
func ParseSLO(spec string) ([]Objective, error) {
	if len(spec) > maxSLOSpec {
		return nil, fmt.Errorf("invalid SLO: longer than %d bytes", maxSLOSpec)
	}
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	var out []Objective
	for _, item := range strings.Split(spec, ",") {
		o, err := parseObjective(strings.TrimSpace(item))
		if err != nil {
			return nil, fmt.Errorf("invalid SLO %q: %w", strings.TrimSpace(item), err)
		}
		out = append(out, o)
	}
	return out, nil
}

func parseObjective(item string) (Objective, error) {
	if item == "" {
		return Objective{}, errors.New("empty objective (stray comma?)")
	}
	i := strings.IndexAny(item, "<>")
	if i < 0 {
		return Objective{}, errors.New("missing comparison (<, <=, > or >=)")
	}
	metric := strings.TrimSpace(item[:i])
	op := item[i : i+1]
	rest := item[i+1:]
	if strings.HasPrefix(rest, "=") {
		op += "="
		rest = rest[1:]
	}
	text := strings.TrimSpace(rest)
	if metric == "" {
		return Objective{}, errors.New("missing metric")
	}
	if text == "" {
		return Objective{}, errors.New("missing value")
	}
	o := Objective{Metric: metric, Op: op, Text: text}
	if err := checkMetric(metric); err != nil {
		return Objective{}, err
	}
	switch metric {
	case "errors.rate":
		v, err := parseRate(text)
		if err != nil {
			return Objective{}, err
		}
		o.Value = v
	case "requests.ok":
		n, err := strconv.ParseUint(text, 10, 63)
		if err != nil {
			return Objective{}, fmt.Errorf("want a whole number of requests, got %q", text)
		}
		o.Value = float64(n)
	default: // a latency, checked by checkMetric
		d, err := time.ParseDuration(text)
		if err != nil {
			return Objective{}, fmt.Errorf("want a duration such as 500ms or 2s, got %q", text)
		}
		if d < 0 {
			return Objective{}, fmt.Errorf("negative duration %q", text)
		}
		o.Value = float64(d) / float64(time.Millisecond)
	}
	return o, nil
}

// parseRate reads "1%" or "0.01" as a fraction in [0, 1].
func parseRate(text string) (float64, error) {
	num, percent := strings.CutSuffix(text, "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("want a rate such as 1%% or 0.01, got %q", text)
	}
	if percent {
		v /= 100
	}
	if v < 0 || v > 1 {
		return 0, fmt.Errorf("rate %q is outside 0..100%%", text)
	}
	return v, nil
}

// checkOp refuses a comparison ParseSLO would not have produced.
func checkOp(op string) error {
	switch op {
	case "<", "<=", ">", ">=":
		return nil
	}
	return fmt.Errorf("unknown comparison %q (want <, <=, > or >=)", op)
}

// checkMetric refuses a metric ParseSLO would not have produced.
func checkMetric(metric string) error {
	family, stat, ok := strings.Cut(metric, ".")
	switch {
	case ok && sloLatencyMetric(family) && sloStat(stat):
		return nil
	case ok && sloLatencyMetric(family):
		return fmt.Errorf("unknown statistic %q (want mean, min, p50, p90, p95, p99, p99.9 or max)", stat)
	case metric == "errors.rate", metric == "requests.ok":
		return nil
	}
	return fmt.Errorf("unknown metric %q (want ttft, itl, tpot or e2e with .mean/.min/.p50/.p90/.p95/.p99/.p99.9/.max, errors.rate or requests.ok)", metric)
}

// Validate says why o cannot be judged: an objective built by hand rather
// than by ParseSLO may name a comparison or metric latscope does not know,
// and every surface then refuses it the same way instead of guessing.
func (o Objective) Validate() error {
	if err := checkMetric(o.Metric); err != nil {
		return fmt.Errorf("invalid SLO %q: %w", o.String(), err)
	}
	if err := checkOp(o.Op); err != nil {
		return fmt.Errorf("invalid SLO %q: %w", o.String(), err)
	}
	if math.IsNaN(o.Value) {
		return fmt.Errorf("invalid SLO %q: no value", o.String())
	}
	return nil
}

// sloScope is what objectives are judged over: the whole run (a Summary)
// or one window of a snapshot.
type sloScope struct {
	latency          func(family string) Stats // ttft, itl, tpot, e2e
	finished, errors int64
	ok               int64
	whole            bool // requests.ok is a count over the whole run: judged only there
}

func summaryScope(s *Summary) sloScope {
	return sloScope{
		latency: func(family string) Stats {
			switch family {
			case "ttft":
				return s.TTFTFor() // the answer's first token when a model reasons
			case "itl":
				return s.ITL
			case "tpot":
				return s.TPOT
			case "e2e":
				return s.E2E
			}
			return Stats{}
		},
		finished: s.Requests.Finished(), errors: s.Requests.Errors, ok: s.Requests.OK, whole: true,
	}
}

func windowScope(w *WindowStats) sloScope {
	return sloScope{
		latency: func(family string) Stats {
			switch family {
			case "ttft":
				if w.Basis != BasisFirst && w.TTFTAnswer.Count > 0 {
					return w.TTFTAnswer // the answer's first token when a model reasons
				}
				return w.TTFT
			case "itl":
				return w.ITL
			case "tpot":
				return w.TPOT
			case "e2e":
				return w.E2E
			}
			return Stats{}
		},
		// A window's Sent counts the requests that finished in it.
		finished: w.Sent, errors: w.Errors, ok: w.OK, whole: w.Window == WinRun,
	}
}

// Evaluate checks each objective against the whole run s. An objective
// whose metric has no data fails, as does one Validate refuses.
func Evaluate(s Summary, objectives []Objective) []SLOResult {
	return judge(summaryScope(&s), objectives)
}

// EvaluateWindow checks each objective against one window of a snapshot:
// what the dashboard marks and what a breach marker is judged on.
// requests.ok, a count over the whole run, is judged only on WinRun;
// elsewhere, like a metric without data, it is not Judged.
func EvaluateWindow(w *WindowStats, objectives []Objective) []SLOResult {
	return judge(windowScope(w), objectives)
}

func judge(sc sloScope, objectives []Objective) []SLOResult {
	out := make([]SLOResult, 0, len(objectives))
	for _, o := range objectives {
		r := SLOResult{Objective: o, Metric: o.Metric, Want: o.Op + o.Text, Got: math.NaN()}
		if err := o.Validate(); err != nil {
			r.GotText = err.Error()
			out = append(out, r)
			continue
		}
		got, text, state := sloValue(sc, o.Metric)
		switch state {
		case sloMeasured:
			r.Got, r.GotText, r.Judged = got, text, true
			r.Pass = compare(got, o.Op, o.Value)
		case sloRunOnly:
			r.GotText = "whole run only"
		default:
			r.GotText = "no data"
		}
		out = append(out, r)
	}
	return out
}

func compare(got float64, op string, want float64) bool {
	switch op {
	case "<":
		return got < want
	case "<=":
		return got <= want
	case ">":
		return got > want
	case ">=":
		return got >= want
	}
	return false // unreachable past Validate
}

// sloState says whether a scope had a value for a metric.
type sloState int

const (
	sloNoData sloState = iota
	sloMeasured
	sloRunOnly // requests.ok over a window
)

// sloValue returns the metric's value in the objective's unit, its text, and
// whether the scope had one.
func sloValue(sc sloScope, metric string) (float64, string, sloState) {
	switch metric {
	case "errors.rate":
		if sc.finished <= 0 {
			return 0, "", sloNoData
		}
		v := float64(sc.errors) / float64(sc.finished)
		return v, fmt.Sprintf("%.2f%%", 100*v), sloMeasured
	case "requests.ok":
		if !sc.whole {
			return 0, "", sloRunOnly
		}
		return float64(sc.ok), strconv.FormatInt(sc.ok, 10), sloMeasured
	}
	family, stat, _ := strings.Cut(metric, ".")
	st := sc.latency(family)
	if st.Count == 0 {
		return 0, "", sloNoData
	}
	var v float64
	switch stat {
	case "mean":
		v = st.Mean
	case "p50":
		v = st.P50
	case "min":
		v = st.Min
	case "p90":
		v = st.P90
	case "p95":
		v = st.P95
	case "p99":
		v = st.P99
	case "p99.9":
		v = st.P999
	case "max":
		v = st.Max
	default:
		return 0, "", sloNoData
	}
	return v, fmt.Sprintf("%.2fms", v), sloMeasured
}
