package aggregate

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// tTable is Student's t two-sided 5 % critical values by degrees of
// freedom, from a printed table: the direct computation the property test
// checks the intervals against.
var tTable = map[int]float64{1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}

func TestRepeatedQuantityMatchesDirectComputation(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 500 {
		n := 2 + rng.IntN(9) // 2..10 runs
		scale := math.Pow(10, rng.Float64()*6-2)
		values := make([]float64, n)
		for i := range values {
			values[i] = scale * (rng.Float64()*10 - 2)
		}
		q := NewRepeatedQuantity("x", "x", "ms", values)

		sum := 0.0
		for _, v := range values {
			sum += v
		}
		mean := sum / float64(n)
		ss := 0.0
		for _, v := range values {
			ss += (v - mean) * (v - mean)
		}
		sd := math.Sqrt(ss / float64(n-1))
		half := tTable[n-1] * sd / math.Sqrt(float64(n))

		tol := 1e-9 * scale * 10
		if q.N != n || math.Abs(q.Mean-mean) > tol || math.Abs(q.Stddev-sd) > tol {
			t.Fatalf("trial %d %v: n=%d mean=%g sd=%g, want %d %g %g", trial, values, q.N, q.Mean, q.Stddev, n, mean, sd)
		}
		// The table has three decimals: allow its rounding.
		if math.Abs((q.High-q.Mean)-half) > 3e-4*half+tol || math.Abs((q.Mean-q.Low)-half) > 3e-4*half+tol {
			t.Fatalf("trial %d %v: CI %g..%g, want %g ± %g", trial, values, q.Low, q.High, mean, half)
		}
	}
}

func TestRepeatedQuantityShiftAndScale(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		n := 2 + rng.IntN(20)
		values, moved := make([]float64, n), make([]float64, n)
		shift, k := rng.Float64()*100-50, 0.1+rng.Float64()*10
		for i := range values {
			values[i] = rng.NormFloat64()
			moved[i] = k*values[i] + shift
		}
		a, b := NewRepeatedQuantity("x", "x", "", values), NewRepeatedQuantity("x", "x", "", moved)
		near := func(got, want float64) bool { return math.Abs(got-want) <= 1e-9*(1+math.Abs(want)) }
		if !near(b.Mean, k*a.Mean+shift) || !near(b.Stddev, k*a.Stddev) ||
			!near(b.Low, k*a.Low+shift) || !near(b.High, k*a.High+shift) {
			t.Fatalf("k=%g shift=%g: %+v from %+v", k, shift, b, a)
		}
		if !(a.Low <= a.Mean && a.Mean <= a.High) {
			t.Fatalf("mean outside its interval: %+v", a)
		}
	}
}

// TestRepeatedIntervalCovers95Percent draws many sets of 5 runs from one
// normal distribution: about 95 % of the intervals hold its mean.
func TestRepeatedIntervalCovers95Percent(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	const trials = 4000
	covered := 0
	for range trials {
		values := make([]float64, 5)
		for i := range values {
			values[i] = 100 + 7*rng.NormFloat64()
		}
		if q := NewRepeatedQuantity("x", "x", "", values); q.Low <= 100 && 100 <= q.High {
			covered++
		}
	}
	// Binomial sd at 4000 trials is 0.34 %: ±1.5 % is over 4 sd.
	if share := float64(covered) / trials; share < 0.935 || share > 0.965 {
		t.Errorf("95%% intervals held the mean %.1f%% of the time", 100*share)
	}
}

func TestRepeatedQuantityFewRuns(t *testing.T) {
	t.Parallel()
	one := NewRepeatedQuantity("x", "x", "", []float64{3})
	if one.Mean != 3 || !math.IsNaN(one.Stddev) || !math.IsNaN(one.Low) || !math.IsNaN(one.High) {
		t.Errorf("one run: %+v, want mean 3 and no interval", one)
	}
	none := NewRepeatedQuantity("x", "x", "", nil)
	if none.N != 0 || !math.IsNaN(none.Mean) {
		t.Errorf("no run: %+v", none)
	}
	same := NewRepeatedQuantity("x", "x", "", []float64{2, 2, 2})
	if same.Low != 2 || same.High != 2 || same.Stddev != 0 {
		t.Errorf("constant runs: %+v, want a zero-width interval at 2", same)
	}
}

// summaryWith is a run summary with the headline fields set.
func summaryWith(ttftP50 float64, ok, errs int64, goodput *float64) Summary {
	st := func(p50 float64) Stats { return Stats{Count: ok, P50: p50, P99: 2 * p50} }
	return Summary{
		TTFT: st(ttftP50 + 1000), TTFTAnswer: st(ttftP50), TTFTBasis: BasisAnswer,
		ITL: st(10), E2E: st(900),
		Requests: Requests{OK: ok, Errors: errs, Sent: ok + errs, TokPerSec: 500, ReqPerSec: 4, GoodPerSec: goodput},
	}
}

func TestHeadline(t *testing.T) {
	t.Parallel()
	h := Headline(summaryWith(100, 3, 1, nil))
	var names []string
	for _, v := range h {
		names = append(names, v.Name)
	}
	want := "ttft_p50_ms ttft_p99_ms itl_p50_ms itl_p99_ms e2e_p50_ms e2e_p99_ms tok_per_s req_per_s error_rate_pct"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("names %q, want %q", got, want)
	}
	if h[0].Value != 100 || h[1].Value != 200 {
		t.Errorf("TTFT on the answer basis: p50 %g p99 %g, want 100 200", h[0].Value, h[1].Value)
	}
	if h[8].Value != 25 || !h[8].OK {
		t.Errorf("error rate %+v, want 25%%", h[8])
	}
	g := 2.5
	if h := Headline(summaryWith(100, 3, 0, &g)); len(h) != 10 || h[9].Name != "goodput_per_s" || h[9].Value != 2.5 {
		t.Errorf("with --slo the goodput is a headline quantity: %+v", h)
	}
	none := Headline(summaryWith(100, 0, 0, nil))
	for _, v := range none {
		if v.OK {
			t.Errorf("a run where nothing finished has no %s", v.Name)
		}
	}
}

func TestRepeatLeavesOutMissingValues(t *testing.T) {
	t.Parallel()
	rep := Repeat([]Summary{summaryWith(100, 3, 0, nil), summaryWith(0, 0, 0, nil), summaryWith(120, 3, 0, nil)})
	if len(rep.Runs) != 3 {
		t.Fatalf("%d runs", len(rep.Runs))
	}
	q := rep.Quantities[0]
	if q.Name != "ttft_p50_ms" || q.N != 2 || q.Mean != 110 {
		t.Errorf("TTFT p50 over the runs that had one: %+v", q)
	}
}

func TestRepeatedJSONShape(t *testing.T) {
	t.Parallel()
	runs := []Summary{summaryWith(100, 3, 0, nil), summaryWith(110, 3, 0, nil)}
	var raws []json.RawMessage
	for _, s := range runs {
		var b bytes.Buffer
		if err := WriteJSON(&b, s); err != nil {
			t.Fatal(err)
		}
		raws = append(raws, b.Bytes())
	}
	var out bytes.Buffer
	if err := WriteRepeatedJSON(&out, raws, Repeat(runs)); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Runs     []map[string]json.RawMessage `json:"runs"`
		Repeated struct {
			Headline []map[string]any `json:"headline"`
		} `json:"repeated"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out.Bytes())
	}
	if len(doc.Runs) != 2 || doc.Runs[0]["ttft"] == nil || doc.Runs[1]["requests"] == nil {
		t.Errorf("runs are the runs' summaries: %s", out.Bytes())
	}
	first := doc.Repeated.Headline[0]
	for _, key := range []string{"name", "label", "unit", "values", "n", "mean", "stddev", "ci95_low", "ci95_high"} {
		if _, ok := first[key]; !ok {
			t.Errorf("headline quantity lacks %q: %v", key, first)
		}
	}
	if first["name"] != "ttft_p50_ms" || first["mean"] != 105.0 || first["n"] != 2.0 {
		t.Errorf("TTFT p50: %v", first)
	}

	// One run: no interval, null rather than an invalid NaN.
	out.Reset()
	if err := WriteRepeatedJSON(&out, raws[:1], Repeat(runs[:1])); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"ci95_low": null`) {
		t.Errorf("one run's interval should be null:\n%s", out.String())
	}

	// The comparison reads the values back and derives the same figures.
	out.Reset()
	rep := Repeat(runs)
	if err := WriteRepeatedJSON(&out, raws, rep); err != nil {
		t.Fatal(err)
	}
	back, err := ReadRepeated(&out)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(rep.Quantities) || back[0].Mean != rep.Quantities[0].Mean || back[0].High != rep.Quantities[0].High {
		t.Errorf("read back %+v, want %+v", back, rep.Quantities)
	}
}

func TestReadRepeatedRejects(t *testing.T) {
	t.Parallel()
	var single bytes.Buffer
	if err := WriteJSON(&single, summaryWith(100, 3, 0, nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRepeated(&single); !errors.Is(err, ErrNotRepeated) {
		t.Errorf("a single run's JSON: %v, want ErrNotRepeated", err)
	}
	for _, doc := range []string{
		``, `[]`, `{"repeated":{"headline":[{"values":[1,2]}]}}`,
		`{"repeated":{"headline":[{"name":"a","values":[1]},{"name":"a","values":[2]}]}}`,
		`{"repeated":{"headline":[{"name":"a","values":["x"]}]}}`,
	} {
		if _, err := ReadRepeated(strings.NewReader(doc)); err == nil {
			t.Errorf("%q: no error", doc)
		}
	}
}

func TestWriteRepeatedTable(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	rep := Repeat([]Summary{summaryWith(100, 3, 0, nil), summaryWith(110, 3, 0, nil), summaryWith(120, 3, 0, nil)})
	if err := WriteRepeatedTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"run 1: TTFT p50 100.0 ms", "run 3: TTFT p50 120.0 ms", "quantity", "95% CI", "TTFT p50", "85.16 – 134.8 ms", "error rate"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
