package probe

import (
	"math"
	"testing"
	"time"
)

// pacerSchedule returns the first n intended send offsets of p, as the Runner
// would see them if it were never late.
func pacerSchedule(t *testing.T, p Pacer, n int) []time.Duration {
	t.Helper()
	out := make([]time.Duration, 0, n)
	var elapsed time.Duration
	for hits := uint64(0); hits < uint64(n); hits++ {
		wait, stop := p.Pace(elapsed, hits)
		if stop {
			t.Fatalf("pacer stopped at hit %d", hits)
		}
		elapsed += max(wait, 0)
		out = append(out, elapsed)
	}
	return out
}

// pacerGapStats returns the mean gap in seconds and the gaps' coefficient of
// variation.
func pacerGapStats(at []time.Duration) (mean, cv float64) {
	var sum, sq float64
	for i := 1; i < len(at); i++ {
		g := (at[i] - at[i-1]).Seconds()
		sum += g
		sq += g * g
	}
	n := float64(len(at) - 1)
	mean = sum / n
	return mean, math.Sqrt(sq/n-mean*mean) / mean
}

func TestPacerShapes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		arrival    string
		rate       float64
		burstiness float64
		wantCV     float64
		cvTol      float64
	}{
		{ArrivalConstant, 50, 0, 0, 0.01},
		{ArrivalPoisson, 50, 0, 1, 0.05},
		{"", 200, 0, 1, 0.05},
		{ArrivalGamma, 20, 1, 1, 0.05},
		{ArrivalGamma, 20, 0.25, 2, 0.15},
		{ArrivalGamma, 20, 4, 0.5, 0.03},
	}
	for _, tt := range tests {
		t.Run(tt.arrival, func(t *testing.T) {
			p, err := NewPacer(tt.arrival, tt.rate, tt.burstiness, 42)
			if err != nil {
				t.Fatal(err)
			}
			at := pacerSchedule(t, p, 20001)
			if at[0] != 0 {
				t.Fatalf("first request due at %s, want at the start", at[0])
			}
			mean, cv := pacerGapStats(at)
			if want := 1 / tt.rate; math.Abs(mean-want)/want > 0.03 {
				t.Errorf("mean gap %.5fs, want %.5fs (rate %v)", mean, want, tt.rate)
			}
			if math.Abs(cv-tt.wantCV) > tt.cvTol {
				t.Errorf("coefficient of variation %.3f, want %.2f±%.2f", cv, tt.wantCV, tt.cvTol)
			}
		})
	}
}

func TestPacerSeeded(t *testing.T) {
	t.Parallel()
	a, _ := NewPacer(ArrivalPoisson, 10, 1, 7)
	b, _ := NewPacer(ArrivalPoisson, 10, 1, 7)
	c, _ := NewPacer(ArrivalPoisson, 10, 1, 8)
	sa, sb, sc := pacerSchedule(t, a, 100), pacerSchedule(t, b, 100), pacerSchedule(t, c, 100)
	for i := range sa {
		if sa[i] != sb[i] {
			t.Fatalf("same seed differs at %d: %s vs %s", i, sa[i], sb[i])
		}
	}
	if sa[50] == sc[50] {
		t.Fatalf("different seeds gave the same schedule")
	}
	// Going back replays the same schedule.
	w1, _ := a.Pace(0, 10)
	w2, _ := b.Pace(0, 10)
	if w1 != w2 || time.Duration(w1) != sa[10] {
		t.Fatalf("replayed due time %s, %s, want %s", w1, w2, sa[10])
	}
}

func TestPacerLateWaitIsNegative(t *testing.T) {
	t.Parallel()
	p := ConstantPacer{Rate: 10}
	// Hit 3 is due at 300 ms; at 1 s it is 700 ms late.
	wait, stop := p.Pace(time.Second, 3)
	if stop || wait != -700*time.Millisecond {
		t.Fatalf("Pace = %s, %v, want -700ms, false", wait, stop)
	}
	wait, _ = p.Pace(250*time.Millisecond, 3)
	if wait != 50*time.Millisecond {
		t.Fatalf("Pace = %s, want 50ms", wait)
	}
}

func TestNewPacerErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		arrival     string
		rate, burst float64
	}{
		{"poisson", 0, 1},
		{"poisson", -1, 1},
		{"poisson", math.NaN(), 1},
		{"poisson", math.Inf(1), 1},
		{"gamma", 1, -1},
		{"poisson", 1, 0.5},
		{"weibull", 1, 1},
	} {
		if _, err := NewPacer(tc.arrival, tc.rate, tc.burst, 1); err == nil {
			t.Errorf("NewPacer(%q, %v, %v) = nil error", tc.arrival, tc.rate, tc.burst)
		}
	}
	if got := (ConstantPacer{}); func() bool { _, s := got.Pace(0, 0); return !s }() {
		t.Errorf("zero ConstantPacer did not stop")
	}
}
