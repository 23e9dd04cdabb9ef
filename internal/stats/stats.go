// Package stats holds the small statistics latscope's comparisons, repeated
// runs and trends share: Student's t distribution, Welch's t-test, the
// Holm-Bonferroni correction and a least-squares line. Pure functions, no
// state.
package stats

import (
	"math"
	"sort"
)

// Welch is Welch's two-sided t-test for a difference between the means of
// xs and ys, which need not have equal variances. It returns the p-value,
// and false when either sample has fewer than two values (no spread to
// judge a difference by).
func Welch(xs, ys []float64) (p float64, ok bool) {
	if len(xs) < 2 || len(ys) < 2 {
		return math.NaN(), false
	}
	mx, vx := MeanVar(xs)
	my, vy := MeanVar(ys)
	nx, ny := float64(len(xs)), float64(len(ys))
	sx, sy := vx/nx, vy/ny
	se2 := sx + sy
	if se2 == 0 {
		// Neither run varies at all: no change, or nothing to measure a
		// change against. A constant that differs is most often an
		// estimate made once per run (a handshake's round trip), whose
		// difference is the estimate's, not one the windows can judge.
		if mx == my {
			return 1, true
		}
		return math.NaN(), false
	}
	t := (mx - my) / math.Sqrt(se2)
	df := se2 * se2 / (sx*sx/(nx-1) + sy*sy/(ny-1))
	return StudentTwoSided(t, df), true
}

// MeanVar is the mean of xs and its sample variance (n−1 denominator);
// xs must hold at least two values.
func MeanVar(xs []float64) (mean, variance float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		variance += (x - mean) * (x - mean)
	}
	return mean, variance / float64(len(xs)-1)
}

// StudentTwoSided is P(|T| ≥ |t|) for Student's t with df degrees of
// freedom: the regularized incomplete beta I_{df/(df+t²)}(df/2, 1/2).
func StudentTwoSided(t, df float64) float64 {
	if math.IsInf(t, 0) {
		return 0
	}
	return regIncBeta(df/2, 0.5, df/(df+t*t))
}

// TCritical is the two-sided critical value of Student's t with df degrees
// of freedom at level alpha: the t with P(|T| ≥ t) = alpha (2.776 for df 4
// and alpha 0.05). It is found by bisection on StudentTwoSided, which falls
// as t grows; NaN for df or alpha out of range.
func TCritical(df, alpha float64) float64 {
	if !(df > 0) || !(alpha > 0 && alpha < 1) {
		return math.NaN()
	}
	lo, hi := 0.0, 1.0
	for StudentTwoSided(hi, df) > alpha {
		lo, hi = hi, hi*2
		if hi > 1e12 {
			return math.Inf(1)
		}
	}
	for range 200 {
		mid := (lo + hi) / 2
		if StudentTwoSided(mid, df) > alpha {
			lo = mid
		} else {
			hi = mid
		}
		if hi-lo < 1e-12*hi {
			break
		}
	}
	return (lo + hi) / 2
}

// regIncBeta is the regularized incomplete beta function I_x(a, b),
// evaluated with its continued fraction (Numerical Recipes, 6.4) on the side
// of x where that converges quickly.
func regIncBeta(a, b, x float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	front := math.Exp(lab - la - lb + a*math.Log(x) + b*math.Log1p(-x))
	if x < (a+1)/(a+b+2) {
		return front * betaFraction(a, b, x) / a
	}
	return 1 - front*betaFraction(b, a, 1-x)/b
}

// betaFraction evaluates the continued fraction of the incomplete beta
// function by the modified Lentz method.
func betaFraction(a, b, x float64) float64 {
	const (
		maxIter = 300
		eps     = 1e-15
		tiny    = 1e-300
	)
	clampTiny := func(v float64) float64 {
		if math.Abs(v) < tiny {
			return tiny
		}
		return v
	}
	c, d := 1.0, 1/clampTiny(1-(a+b)*x/(a+1))
	h := d
	for m := 1.0; m <= maxIter; m++ {
		// The even step, then the odd one.
		num := m * (b - m) * x / ((a + 2*m - 1) * (a + 2*m))
		d = 1 / clampTiny(1+num*d)
		c = clampTiny(1 + num/c)
		h *= d * c
		num = -(a + m) * (a + b + m) * x / ((a + 2*m) * (a + 2*m + 1))
		d = 1 / clampTiny(1+num*d)
		c = clampTiny(1 + num/c)
		step := d * c
		h *= step
		if math.Abs(step-1) < eps {
			break
		}
	}
	return h
}

// Holm marks which of the p-values are significant at a family-wise error
// rate alpha (Holm–Bonferroni): sorted ascending, the k-th smallest (from 0)
// must be at most alpha/(m−k), and the first that is not ends the rejections.
// NaN p-values are not tested and never significant.
func Holm(ps []float64, alpha float64) []bool {
	idx := make([]int, 0, len(ps))
	for i, p := range ps {
		if !math.IsNaN(p) {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool { return ps[idx[a]] < ps[idx[b]] })
	out := make([]bool, len(ps))
	m := len(idx)
	for k, i := range idx {
		if ps[i] > alpha/float64(m-k) {
			break
		}
		out[i] = true
	}
	return out
}

// HolmAdjusted is each p-value adjusted for Holm–Bonferroni: sorted
// ascending, the k-th smallest (from 0) times m−k, made non-decreasing and
// capped at 1. An adjusted p at most alpha is exactly what Holm marks
// significant at alpha, so it can be read against alpha directly. NaN
// p-values are not tested and stay NaN.
func HolmAdjusted(ps []float64) []float64 {
	idx := make([]int, 0, len(ps))
	for i, p := range ps {
		if !math.IsNaN(p) {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool { return ps[idx[a]] < ps[idx[b]] })
	out := make([]float64, len(ps))
	for i := range out {
		out[i] = math.NaN()
	}
	m, running := len(idx), 0.0
	for k, i := range idx {
		running = math.Max(running, math.Min(1, ps[i]*float64(m-k)))
		out[i] = running
	}
	return out
}

// LineFit is the least-squares line through the n points at(0) … at(n-1)
// (x, y): its slope (y per unit of x) and the mean of y. The slope is 0
// when there are fewer than two points or every x is the same.
func LineFit(n int, at func(i int) (x, y float64)) (slope, meanY float64) {
	if n == 0 {
		return 0, 0
	}
	var mx, my float64
	for i := range n {
		x, y := at(i)
		mx += x
		my += y
	}
	mx /= float64(n)
	my /= float64(n)
	var sxy, sxx float64
	for i := range n {
		x, y := at(i)
		sxy += (x - mx) * (y - my)
		sxx += (x - mx) * (x - mx)
	}
	if sxx == 0 {
		return 0, my
	}
	return sxy / sxx, my
}
