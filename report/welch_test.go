package report

import (
	"math"
	"testing"
)

func TestStudentTwoSidedMatchesTables(t *testing.T) {
	t.Parallel()
	// Critical values of Student's t at two-sided 5% and 1%.
	for _, tc := range []struct{ t, df, p float64 }{
		{12.706, 1, 0.05},
		{2.228, 10, 0.05},
		{3.169, 10, 0.01},
		{2.042, 30, 0.05},
		{1.960, 1e6, 0.05},
		{0, 5, 1},
	} {
		if got := studentTwoSided(tc.t, tc.df); math.Abs(got-tc.p) > 5e-4 {
			t.Errorf("t=%g df=%g: p=%.5f, want %.3f", tc.t, tc.df, got, tc.p)
		}
	}
}

func TestWelch(t *testing.T) {
	t.Parallel()
	same := []float64{10, 11, 9, 10.5, 9.5, 10.2}
	shifted := []float64{15, 16, 14, 15.5, 14.5, 15.2}
	if p, ok := welch(same, shifted); !ok || p > 1e-6 {
		t.Errorf("a shift of 10 sd: p=%g ok=%v, want tiny", p, ok)
	}
	if p, ok := welch(same, []float64{10.1, 9.9, 10.4, 9.6, 10.3, 9.8}); !ok || p < 0.5 {
		t.Errorf("same distribution: p=%g, want large", p)
	}
	if _, ok := welch([]float64{1}, shifted); ok {
		t.Error("one window cannot be tested")
	}
	if p, _ := welch([]float64{0, 0}, []float64{0, 0, 0}); p != 1 {
		t.Errorf("two constant, equal runs: p=%g, want 1", p)
	}
	if p, ok := welch([]float64{1, 1}, []float64{2, 2}); ok || !math.IsNaN(p) {
		t.Errorf("two constant, different runs: p=%g, want not tested (no noise to judge the change by)", p)
	}
}

func TestHolm(t *testing.T) {
	t.Parallel()
	nan := math.NaN()
	// m = 4 tested: thresholds 0.0125, 0.0167, 0.025, 0.05 in order.
	got := holm([]float64{0.01, 0.04, nan, 0.012, 0.03}, 0.05)
	want := []bool{true, false, false, true, false}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("holm = %v, want %v", got, want)
			break
		}
	}
}
