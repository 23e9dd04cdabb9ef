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
	GotText   string  // e.g. "412.30ms", "0.50%", "no data"
	Pass      bool    // false when there was no data
}

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
	case "mean", "p50", "p90", "p99", "max":
		return true
	}
	return false
}

// maxSLOSpec bounds the spec's length; a real one is a few dozen bytes.
const maxSLOSpec = 4096

// ParseSLO parses a comma-separated list of objectives such as
// "ttft.p99<500ms,itl.p99<50ms,e2e.mean<=2s,errors.rate<1%,requests.ok>=100".
// Latency metrics are ttft, itl, tpot and e2e with mean, p50, p90, p99 or max,
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
	family, stat, ok := strings.Cut(metric, ".")
	switch {
	case ok && sloLatencyMetric(family) && sloStat(stat):
		d, err := time.ParseDuration(text)
		if err != nil {
			return Objective{}, fmt.Errorf("want a duration such as 500ms or 2s, got %q", text)
		}
		if d < 0 {
			return Objective{}, fmt.Errorf("negative duration %q", text)
		}
		o.Value = float64(d) / float64(time.Millisecond)
	case ok && sloLatencyMetric(family):
		return Objective{}, fmt.Errorf("unknown statistic %q (want mean, p50, p90, p99 or max)", stat)
	case metric == "errors.rate":
		v, err := parseRate(text)
		if err != nil {
			return Objective{}, err
		}
		o.Value = v
	case metric == "requests.ok":
		n, err := strconv.ParseUint(text, 10, 63)
		if err != nil {
			return Objective{}, fmt.Errorf("want a whole number of requests, got %q", text)
		}
		o.Value = float64(n)
	default:
		return Objective{}, fmt.Errorf("unknown metric %q (want ttft, itl, tpot or e2e with .mean/.p50/.p90/.p99/.max, errors.rate or requests.ok)", metric)
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

// Evaluate checks each objective against s. An objective whose metric has
// no data fails.
func Evaluate(s Summary, objectives []Objective) []SLOResult {
	out := make([]SLOResult, 0, len(objectives))
	for _, o := range objectives {
		got, text, ok := sloValue(s, o.Metric)
		r := SLOResult{Objective: o, Metric: o.Metric, Want: o.Op + o.Text, Got: got, GotText: text}
		if !ok {
			r.Got, r.GotText = math.NaN(), "no data"
		} else {
			r.Pass = compare(got, o.Op, o.Value)
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
	return false
}

// sloValue returns the metric's value in the objective's unit, its text, and
// whether there was data for it.
func sloValue(s Summary, metric string) (float64, string, bool) {
	switch metric {
	case "errors.rate":
		v, ok := s.Requests.ErrorRate()
		if !ok {
			return 0, "", false
		}
		return v, fmt.Sprintf("%.2f%%", 100*v), true
	case "requests.ok":
		return float64(s.Requests.OK), strconv.FormatInt(s.Requests.OK, 10), true
	}
	family, stat, _ := strings.Cut(metric, ".")
	var st Stats
	switch family {
	case "ttft":
		st = s.TTFTFor()
	case "itl":
		st = s.ITL
	case "tpot":
		st = s.TPOT
	case "e2e":
		st = s.E2E
	default:
		return 0, "", false
	}
	if st.Count == 0 {
		return 0, "", false
	}
	var v float64
	switch stat {
	case "mean":
		v = st.Mean
	case "p50":
		v = st.P50
	case "p90":
		v = st.P90
	case "p99":
		v = st.P99
	case "max":
		v = st.Max
	default:
		return 0, "", false
	}
	return v, fmt.Sprintf("%.2fms", v), true
}
