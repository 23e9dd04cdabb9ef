package stats

import (
	"math"
	"math/rand/v2"
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
		if got := StudentTwoSided(tc.t, tc.df); math.Abs(got-tc.p) > 5e-4 {
			t.Errorf("t=%g df=%g: p=%.5f, want %.3f", tc.t, tc.df, got, tc.p)
		}
	}
}

func TestWelch(t *testing.T) {
	t.Parallel()
	same := []float64{10, 11, 9, 10.5, 9.5, 10.2}
	shifted := []float64{15, 16, 14, 15.5, 14.5, 15.2}
	if p, ok := Welch(same, shifted); !ok || p > 1e-6 {
		t.Errorf("a shift of 10 sd: p=%g ok=%v, want tiny", p, ok)
	}
	if p, ok := Welch(same, []float64{10.1, 9.9, 10.4, 9.6, 10.3, 9.8}); !ok || p < 0.5 {
		t.Errorf("same distribution: p=%g, want large", p)
	}
	if _, ok := Welch([]float64{1}, shifted); ok {
		t.Error("one window cannot be tested")
	}
	if p, _ := Welch([]float64{0, 0}, []float64{0, 0, 0}); p != 1 {
		t.Errorf("two constant, equal runs: p=%g, want 1", p)
	}
	if p, ok := Welch([]float64{1, 1}, []float64{2, 2}); ok || !math.IsNaN(p) {
		t.Errorf("two constant, different runs: p=%g, want not tested (no noise to judge the change by)", p)
	}
}

func TestHolm(t *testing.T) {
	t.Parallel()
	nan := math.NaN()
	// m = 4 tested: thresholds 0.0125, 0.0167, 0.025, 0.05 in order.
	got := Holm([]float64{0.01, 0.04, nan, 0.012, 0.03}, 0.05)
	want := []bool{true, false, false, true, false}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("holm = %v, want %v", got, want)
			break
		}
	}
}

func TestTCriticalMatchesTables(t *testing.T) {
	t.Parallel()
	// Two-sided 5% critical values of Student's t (any printed table).
	for _, tc := range []struct{ df, want float64 }{
		{1, 12.706}, {2, 4.303}, {3, 3.182}, {4, 2.776}, {9, 2.262}, {29, 2.045}, {1e6, 1.960},
	} {
		if got := TCritical(tc.df, 0.05); math.Abs(got-tc.want) > 1e-3 {
			t.Errorf("df=%g: t=%.4f, want %.3f", tc.df, got, tc.want)
		}
	}
	for _, bad := range [][2]float64{{0, 0.05}, {-1, 0.05}, {math.NaN(), 0.05}, {4, 0}, {4, 1}, {4, math.NaN()}} {
		if got := TCritical(bad[0], bad[1]); !math.IsNaN(got) {
			t.Errorf("TCritical(%g, %g) = %g, want NaN", bad[0], bad[1], got)
		}
	}
}

func TestTCriticalInvertsStudentTwoSided(t *testing.T) {
	t.Parallel()
	for _, df := range []float64{1, 1.5, 2, 3.7, 7, 20, 200} {
		for _, alpha := range []float64{0.001, 0.01, 0.05, 0.2, 0.5} {
			tc := TCritical(df, alpha)
			if p := StudentTwoSided(tc, df); math.Abs(p-alpha) > 1e-9 {
				t.Errorf("df=%g alpha=%g: t=%g gives p=%g", df, alpha, tc, p)
			}
		}
	}
}

func TestHolmAdjustedAgreesWithHolm(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(9, 10))
	for range 2000 {
		ps := make([]float64, 1+rng.IntN(10))
		for i := range ps {
			switch rng.IntN(6) {
			case 0:
				ps[i] = math.NaN()
			case 1:
				ps[i] = 0.01 // ties
			default:
				ps[i] = math.Pow(rng.Float64(), 3)
			}
		}
		alpha := []float64{0.01, 0.05, 0.1}[rng.IntN(3)]
		adj, sig := HolmAdjusted(ps), Holm(ps, alpha)
		for i := range ps {
			if math.IsNaN(ps[i]) != math.IsNaN(adj[i]) || (adj[i] <= alpha) != sig[i] || adj[i] > 1 || adj[i] < ps[i] {
				t.Fatalf("ps %v alpha %g: adjusted %v, Holm %v", ps, alpha, adj, sig)
			}
		}
	}
}

func TestLineFit(t *testing.T) {
	xs, ys := []float64{0, 1, 2, 3}, []float64{1, 3, 5, 7}
	at := func(i int) (float64, float64) { return xs[i], ys[i] }
	if slope, mean := LineFit(4, at); slope != 2 || mean != 4 {
		t.Errorf("LineFit = %v, %v; want 2, 4", slope, mean)
	}
	same := func(int) (float64, float64) { return 5, 3 }
	if slope, mean := LineFit(3, same); slope != 0 || mean != 3 {
		t.Errorf("LineFit with one x = %v, %v; want 0, 3", slope, mean)
	}
	if slope, mean := LineFit(0, same); slope != 0 || mean != 0 {
		t.Errorf("LineFit of nothing = %v, %v", slope, mean)
	}
}
