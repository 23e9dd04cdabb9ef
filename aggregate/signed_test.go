package aggregate

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// residualRun is a synthetic run of 216 requests whose unattributed
// residuals are negative on 100 of them (down to -20.9 ms) and whose
// server wait is measured on all but 3, with the exact residuals sent.
func residualRun(t *testing.T) (*Aggregator, []time.Duration) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 7))
	a := New(Config{})
	t0 := base()
	var residuals []time.Duration
	for i := range 216 {
		// Whole microseconds: the aggregator's base unit.
		u := time.Duration(rng.IntN(8000)+1) * time.Microsecond
		switch {
		case i < 100:
			u = -time.Duration(rng.IntN(20900)+1) * time.Microsecond
		case i == 100:
			u = 0
		}
		if i == 7 {
			u = -20900 * time.Microsecond
		}
		residuals = append(residuals, u)
		const ttft = 60 * time.Millisecond
		r := okReq(t0.Add(time.Duration(i)*20*time.Millisecond), ttft, 0, 1)
		prov := event.Measured
		if i%72 == 5 {
			prov = event.Estimated
		}
		r.Breakdown = []event.StageTiming{
			{Stage: event.StageServerWait, Duration: ttft - u, Provenance: prov},
			{Stage: event.StageUnattributed, Duration: u, Provenance: event.Estimated},
		}
		addAll(a, r)
	}
	return a, residuals
}

// exactPercentile is the value at p of sorted values, ranked as HDR ranks.
func exactPercentile(sorted []time.Duration, p float64) time.Duration {
	rank := max(int(p/100*float64(len(sorted))+0.5), 1)
	return sorted[rank-1]
}

// TestNegativeResiduals: negative residuals are kept as they are: the
// summary's mean is the true (signed) mean, the negatives are counted,
// the percentiles are within the histograms' precision of the true ones,
// nothing is clamped, and the table shows the negative values.
func TestNegativeResiduals(t *testing.T) {
	t.Parallel()
	a, residuals := residualRun(t)
	s := a.Summary()

	var sum time.Duration
	negative := 0
	for _, u := range residuals {
		sum += u
		if u < 0 {
			negative++
		}
	}
	trueMean := float64(sum) / float64(len(residuals)) / 1e6 // ms

	var out struct {
		Requests struct {
			Clamped int64 `json:"clamped_values"`
		} `json:"requests"`
		Breakdown struct {
			Stages map[event.Stage]struct {
				Count    int64              `json:"count"`
				Mean     float64            `json:"mean"`
				P50      float64            `json:"p50"`
				P90      float64            `json:"p90"`
				P99      float64            `json:"p99"`
				Max      float64            `json:"max"`
				Negative int64              `json:"negative"`
				Main     event.Provenance   `json:"main_provenance"`
				Mix      map[string]int64   `json:"provenance_count"`
				Provs    []event.Provenance `json:"provenance"`
			} `json:"stages"`
		} `json:"breakdown"`
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, s); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(buf.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	u := out.Breakdown.Stages[event.StageUnattributed]
	// Exact, up to the JSON's rounding to the microsecond.
	if math.Abs(u.Mean-trueMean) > 0.0005 || u.Mean >= 0 {
		t.Errorf("unattributed mean %v ms in the JSON, the true mean is %v ms", u.Mean, trueMean)
	}
	if u.Negative != int64(negative) || u.Count != int64(len(residuals)) {
		t.Errorf("unattributed: %d negative of %d, want %d of %d", u.Negative, u.Count, negative, len(residuals))
	}
	if out.Requests.Clamped != 0 {
		t.Errorf("%d values clamped, want none", out.Requests.Clamped)
	}
	sorted := slices.Clone(residuals)
	slices.Sort(sorted)
	for _, c := range []struct {
		name string
		got  float64
		p    float64
	}{{"p50", u.P50, 50}, {"p90", u.P90, 90}, {"p99", u.P99, 99}} {
		want := float64(exactPercentile(sorted, c.p)) / 1e6
		// 3 significant digits, plus the JSON's microsecond.
		if tol := math.Abs(want)*2e-3 + 0.002; math.Abs(c.got-want) > tol {
			t.Errorf("unattributed %s %v ms, true %v ms", c.name, c.got, want)
		}
	}
	if u.Max != float64(sorted[len(sorted)-1])/1e6 {
		t.Errorf("unattributed max %v, want %v", u.Max, float64(sorted[len(sorted)-1])/1e6)
	}
	// Below the median, a percentile of this run is negative: HDR alone
	// would have read it as 0.
	if p := s.Breakdown.Stages[event.StageUnattributed]; p.P50 >= 0 && exactPercentile(sorted, 50) < 0 {
		t.Errorf("unattributed p50 %v, want it negative as the true one %v", p.P50, exactPercentile(sorted, 50))
	}
	if w := a.Snapshot(a.Latest()).Windows[WinRun].Breakdown[event.StageUnattributed]; w.Negative != int64(negative) || w.Mean >= 0 {
		t.Errorf("run window: %+v, want %d negative and a negative mean", w, negative)
	}

	// The server wait: measured on 213 of 216, so its main provenance is
	// measured, with the 3 estimated ones counted beside it.
	sw := out.Breakdown.Stages[event.StageServerWait]
	if sw.Main != event.Measured || sw.Mix["measured"] != 213 || sw.Mix["estimated"] != 3 {
		t.Errorf("server wait provenance: main %q, counts %v, want measured (213 measured, 3 estimated)", sw.Main, sw.Mix)
	}

	checkResidualTable(t, s)
}

// checkResidualTable checks that the table shows the negative residuals
// and the server wait's provenance, and says nothing was clamped.
func checkResidualTable(t *testing.T, s Summary) {
	t.Helper()
	var table bytes.Buffer
	if err := WriteTable(&table, s); err != nil {
		t.Fatal(err)
	}
	text := table.String()
	var row string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "unattributed ") {
			row = line
		}
	}
	if fields := strings.Fields(row); len(fields) < 3 || !strings.HasPrefix(fields[2], "-") {
		t.Errorf("the table's unattributed row %q does not show its negative mean", row)
	}
	if !strings.Contains(text, "negative on 100 of 216 requests") {
		t.Errorf("the table does not count the negative residuals:\n%s", text)
	}
	if strings.Contains(text, "clamped") {
		t.Errorf("the table says values were clamped:\n%s", text)
	}
	if !strings.Contains(text, "measured (measured 213, estimated 3)") {
		t.Errorf("the table does not give the server wait's main provenance with its counts:\n%s", text)
	}
}

// TestSignedWindow: a window's statistics (not only the run's) keep
// negative values, with all-negative series too.
func TestSignedWindow(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	t0 := base()
	for i, u := range []time.Duration{-3 * time.Millisecond, -1 * time.Millisecond, -2 * time.Millisecond} {
		r := okReq(t0.Add(time.Duration(i)*100*time.Millisecond), 50*time.Millisecond, 0, 1)
		r.Breakdown = []event.StageTiming{
			{Stage: event.StagePrefill, Duration: 50*time.Millisecond - u, Provenance: event.ServerReported},
			{Stage: event.StageUnattributed, Duration: u, Provenance: event.Estimated},
		}
		addAll(a, r)
	}
	s := a.Snapshot(t0.Add(time.Second))
	for _, w := range []Window{Win10s, Win1m, WinRun} {
		st := s.Windows[w].Breakdown[event.StageUnattributed]
		if st.Count != 3 || st.Negative != 3 || st.Mean != -2 || st.Max != -1 || st.P50 > -1.9 || st.P50 < -2.1 {
			t.Errorf("%s window: %+v, want 3 negative, mean -2, p50 -2, max -1", w, st)
		}
		if m := s.Windows[w].BreakdownProvenance[event.StagePrefill].Main(); m != event.ServerReported {
			t.Errorf("%s window: prefill's main provenance %q, want server", w, m)
		}
	}
}

// TestProvenanceMain: more than half decides; else mixed.
func TestProvenanceMain(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		mix  ProvenanceMix
		want event.Provenance
	}{
		{ProvenanceMix{}, ""},
		{ProvenanceMix{Measured: 269, Estimated: 3}, event.Measured},
		{ProvenanceMix{Measured: 3, Estimated: 269}, event.Estimated},
		{ProvenanceMix{Measured: 5, Estimated: 5}, Mixed},
		{ProvenanceMix{Measured: 4, Server: 3, Estimated: 3}, Mixed},
	} {
		if got := c.mix.Main(); got != c.want {
			t.Errorf("%+v: main %q, want %q", c.mix, got, c.want)
		}
	}
}
