package sweepjudge

import (
	"math"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// line returns n readings every step from t0: v(i) = base + perSec·t,
// plus wiggle alternating in sign.
func line(n int, step time.Duration, base, perSec, wiggle float64) []point {
	out := make([]point, n)
	for i := range out {
		at := time.Duration(i) * step
		w := wiggle
		if i%2 == 1 {
			w = -wiggle
		}
		out[i] = point{t0.Add(at), base + perSec*at.Seconds() + w}
	}
	return out
}

func TestFitLine(t *testing.T) {
	slope, mean, n := fitLine(line(11, time.Second, 10, 2, 0))
	if n != 11 || math.Abs(slope-2) > 1e-9 || math.Abs(mean-20) > 1e-9 {
		t.Errorf("fitLine = slope %v, mean %v, n %d; want 2, 20, 11", slope, mean, n)
	}
	if slope, _, _ := fitLine([]point{{t0, 1}, {t0, 5}}); slope != 0 {
		t.Errorf("readings at one instant: slope %v, want 0", slope)
	}
}

func TestTrendLimit(t *testing.T) {
	tests := []struct {
		name      string
		pts       []point
		wantLimit float64
		wantFlat  bool
		wantGrow  bool
	}{
		// An empty queue wobbling by one request is flat: the floor holds it.
		{"near zero", line(9, 250*time.Millisecond, 0.5, 0, 0.5), 4, true, false},
		// About 100 deep: 10% of the mean level is the limit.
		{"deep and growing", line(9, 250*time.Millisecond, 100, 10, 0), 11, false, true},
		{"deep and flat", line(9, 250*time.Millisecond, 100, 1, 0), 10.1, true, false},
		{"shrinking", line(9, 250*time.Millisecond, 30, -5, 0), 4, false, false},
		{"too few", line(2, time.Second, 1, 100, 0), 0, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := trendOf(tc.pts, 2*time.Second, 0.1, 4)
			if math.Abs(tr.Limit-tc.wantLimit) > 1e-6 || tr.Flat() != tc.wantFlat || tr.Growing() != tc.wantGrow {
				t.Errorf("trend %+v: limit %v flat %v growing %v; want %v %v %v", tr, tr.Limit, tr.Flat(), tr.Growing(), tc.wantLimit, tc.wantFlat, tc.wantGrow)
			}
		})
	}
}

func TestMedianPointsIgnoreOneSlowRequest(t *testing.T) {
	// 60 requests with a flat 20 ms TTFT and one of 2 s at the end: a line
	// through the raw values would climb; through the group medians it is
	// flat.
	samples := line(60, 50*time.Millisecond, 20, 0, 0)
	samples[59].v = 2000
	pts := medianPoints(samples)
	if len(pts) != maxGroups {
		t.Fatalf("%d groups, want %d", len(pts), maxGroups)
	}
	if tr := trendOf(pts, 3*time.Second, 0.1, 2); !tr.Flat() {
		t.Errorf("TTFT trend %+v: want flat despite one slow request", tr)
	}
	if raw := trendOf(samples, 3*time.Second, 0.1, 2); raw.Flat() {
		t.Errorf("raw trend %+v: the test wants a raw line that is not flat", raw)
	}
	if got := medianPoints(samples[:minPerGroup-1]); got != nil {
		t.Errorf("fewer samples than a group: %v, want none", got)
	}
}

func TestMedian(t *testing.T) {
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("odd median %v, want 2", got)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("even median %v, want 2.5", got)
	}
	if got := median(nil); !math.IsNaN(got) {
		t.Errorf("empty median %v, want NaN", got)
	}
}

// flat and grow are trends as the steadiness rule sees them.
var (
	flat   = Trend{Seen: true, Points: 8, Level: 20, Change: 0.5, Limit: 2}
	grow   = Trend{Seen: true, Points: 8, Level: 20, Change: 12, Limit: 4}
	unseen = Trend{}
)

func TestAssess(t *testing.T) {
	tests := []struct {
		name string
		s    Signals
		want state
		why  string
	}{
		{"everything flat", Signals{TTFT: flat, Queue: flat, InFlight: flat, QueueAll: flat, InFlightAll: flat}, steady, "TTFT p50 +0.5 ms, queue +0.5, in flight +0.5"},
		{"no server metrics", Signals{TTFT: flat, InFlight: flat, InFlightAll: flat}, steady, "in flight +0.5 over the last 2s"},
		{"queue grows all along", Signals{TTFT: grow, Queue: grow, QueueAll: grow, InFlight: grow, InFlightAll: grow}, saturated, "queue grew by 12.0"},
		{"in flight grows, no server metrics", Signals{TTFT: flat, InFlight: grow, InFlightAll: grow}, saturated, "requests in flight grew"},
		// A queue that rises only lately (a burst) is not yet saturation,
		// nor steady.
		{"late rise only", Signals{TTFT: flat, Queue: grow, QueueAll: flat, InFlight: flat, InFlightAll: flat}, undecided, "queue moved +12.0"},
		// A queue that grew early and has stopped is settling, not saturated.
		{"grew then stopped", Signals{TTFT: flat, Queue: flat, QueueAll: grow, InFlight: flat, InFlightAll: flat}, steady, ""},
		{"TTFT still rising", Signals{TTFT: Trend{Seen: true, Points: 8, Level: 50, Change: 9, Limit: 5}, Queue: flat, QueueAll: flat}, undecided, "TTFT p50 moved +9.0 ms (limit ±5.0)"},
		{"no successful requests", Signals{TTFT: unseen, Queue: flat, QueueAll: flat}, undecided, "too few successful requests"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, why := assess(tc.s, 2*time.Second)
			if got != tc.want || !strings.Contains(why, tc.why) {
				t.Errorf("assess = %v %q, want %v containing %q", got, why, tc.want, tc.why)
			}
		})
	}
}

func TestJoinWords(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{{nil, ""}, {[]string{"a"}, "a"}, {[]string{"a", "b"}, "a and b"}, {[]string{"a", "b", "c"}, "a, b and c"}} {
		if got := joinWords(tc.in); got != tc.want {
			t.Errorf("joinWords(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
