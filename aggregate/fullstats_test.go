package aggregate

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The summary's full statistics (min, p95, p99.9, stddev beside the rest)
// agree with a direct computation on the values recorded, for random
// distributions: exactly for count, min, max and mean, to the rounding of
// the JSON for stddev, and within HDR's 3-digit precision (or one
// microsecond) for the percentiles.
func TestSummaryFullStatisticsMatchDirectComputation(t *testing.T) {
	t.Parallel()
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := 1 + rng.IntN(3000)
		a := New(Config{})
		t0 := base()
		vals := make([]float64, n) // ms, at microsecond resolution
		for i := range vals {
			us := 1 + int64(rng.ExpFloat64()*float64(1+rng.IntN(200_000)))
			if rng.IntN(50) == 0 {
				us *= 20 // a tail
			}
			us = min(us, 9*60*1_000_000)
			vals[i] = float64(us) / 1000
			addAll(a, okReq(t0.Add(time.Duration(i)*time.Millisecond), time.Duration(us)*time.Microsecond, 0, 1))
		}
		var buf bytes.Buffer
		if err := WriteJSON(&buf, a.Summary()); err != nil {
			t.Fatal(err)
		}
		var got struct {
			TTFT map[string]float64 `json:"ttft"`
		}
		if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		want := directStats(vals)
		g := got.TTFT
		for _, k := range []string{"count", "min", "max", "mean", "stddev"} {
			if math.Abs(g[k]-want[k]) > 0.0011 {
				t.Errorf("seed %d n %d: %s = %v, want %v", seed, n, k, g[k], want[k])
			}
		}
		for _, k := range []string{"p50", "p90", "p95", "p99", "p99_9"} {
			if math.Abs(g[k]-want[k]) > max(want[k]*0.001, 0.0011) {
				t.Errorf("seed %d n %d: %s = %v, want %v (±0.1%%)", seed, n, k, g[k], want[k])
			}
		}
	}
}

// directStats computes what a Stats holds. A percentile p is the value of
// rank p×n rounded to the nearest whole rank (at least 1), as HDR
// histograms rank it.
func directStats(vals []float64) map[string]float64 {
	s := slices.Clone(vals)
	slices.Sort(s)
	n := float64(len(s))
	var sum float64
	for _, v := range s {
		sum += v
	}
	mean := sum / n
	var ss float64
	for _, v := range s {
		ss += (v - mean) * (v - mean)
	}
	rank := func(p float64) float64 {
		r := max(int(p/100*n+0.5), 1)
		return s[r-1]
	}
	return map[string]float64{
		"count": n, "min": s[0], "max": s[len(s)-1], "mean": mean, "stddev": math.Sqrt(ss / n),
		"p50": rank(50), "p90": rank(90), "p95": rank(95), "p99": rank(99), "p99_9": rank(99.9),
	}
}

// Objectives may name the statistics the summary added: p95 and p99.9.
func TestSLOOnP95AndP999(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{"ttft.p95<500ms", "ttft.p99.9<1s", "e2e.min<10ms"} {
		if _, err := ParseSLO(spec); err != nil {
			t.Errorf("ParseSLO(%q): %v", spec, err)
		}
	}
}
