package sweepjudge

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/latscope/latscope/internal/stats"
)

// point is one reading of a series.
type point struct {
	t time.Time
	v float64
}

// Trend is how one series moved over a stretch of a step: the least-squares
// line through its readings, as the change it makes over the stretch.
type Trend struct {
	Seen   bool    `json:"seen"`   // enough readings to fit a line
	Points int     `json:"points"` // readings (or groups of requests) fitted
	Level  float64 `json:"level"`  // mean value
	Change float64 `json:"change"` // fitted change over the stretch, in the series' unit
	Limit  float64 `json:"limit"`  // the largest change that still counts as flat
}

// Flat reports whether the series held still: it moved less than its limit
// either way.
func (t Trend) Flat() bool { return t.Seen && math.Abs(t.Change) <= t.Limit }

// Growing reports whether the series rose by more than its limit.
func (t Trend) Growing() bool { return t.Seen && t.Change > t.Limit }

// minTrendPoints is the fewest readings a line is fitted through.
const minTrendPoints = 3

// trendOf fits a line through pts over a stretch of length span and sets
// its limit: a relative tolerance of the level, but never below floor, so a
// series near zero (an empty queue) is not held to a tolerance of nothing.
func trendOf(pts []point, span time.Duration, tolerance, floor float64) Trend {
	slope, mean, n := fitLine(pts)
	if n < minTrendPoints {
		return Trend{Points: n}
	}
	return Trend{
		Seen:   true,
		Points: n,
		Level:  mean,
		Change: slope * span.Seconds(),
		Limit:  max(floor, tolerance*math.Abs(mean)),
	}
}

// fitLine returns the least-squares slope (per second) and the mean of pts.
func fitLine(pts []point) (slope, mean float64, n int) {
	n = len(pts)
	if n == 0 {
		return 0, 0, 0
	}
	t0 := pts[0].t
	slope, mean = stats.LineFit(n, func(i int) (float64, float64) { return pts[i].t.Sub(t0).Seconds(), pts[i].v })
	return slope, mean, n
}

// Grouping of request latencies for the TTFT trend: each group is a run of
// consecutive completions and gives one point, its median, so a single
// slow request cannot tilt the line.
const (
	minPerGroup = 5
	maxGroups   = 12
)

// medianPoints sorts samples by time and splits them into up to maxGroups
// runs of at least minPerGroup; each run gives its mean time and its median.
func medianPoints(samples []point) []point {
	n := len(samples) / minPerGroup
	groups := min(n, maxGroups)
	if groups == 0 {
		return nil
	}
	sorted := slices.Clone(samples)
	slices.SortFunc(sorted, func(a, b point) int { return a.t.Compare(b.t) })
	out := make([]point, 0, groups)
	vals := make([]float64, 0, len(sorted)/groups+1)
	for g := range groups {
		run := sorted[g*len(sorted)/groups : (g+1)*len(sorted)/groups]
		vals = vals[:0]
		var ts float64
		for _, p := range run {
			vals = append(vals, p.v)
			ts += float64(p.t.Sub(sorted[0].t))
		}
		t := sorted[0].t.Add(time.Duration(ts / float64(len(run))))
		out = append(out, point{t: t, v: median(vals)})
	}
	return out
}

// median returns the median of vs, reordering them.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	slices.Sort(vs)
	m := len(vs) / 2
	if len(vs)%2 == 1 {
		return vs[m]
	}
	return (vs[m-1] + vs[m]) / 2
}

// within returns the points of pts inside [from, to].
func within(pts []point, from, to time.Time) []point {
	var out []point
	for _, p := range pts {
		if !p.t.Before(from) && !p.t.After(to) {
			out = append(out, p)
		}
	}
	return out
}

// Signals are a step's trends: over the last window (is it steady now?) and
// over the whole measured part (has the backlog grown all along?).
type Signals struct {
	// TTFT is the p50 time to first token, in milliseconds, over the last
	// window.
	TTFT Trend `json:"ttft_p50_ms"`
	// Queue is the server's queue depth (requests waiting) and InFlight the
	// probe's requests in flight (sent, not finished: arrivals less
	// completions), over the last window.
	Queue    Trend `json:"queue_depth"`
	InFlight Trend `json:"in_flight"`
	// QueueAll and InFlightAll are the same over the whole measured part.
	QueueAll    Trend `json:"queue_depth_all"`
	InFlightAll Trend `json:"in_flight_all"`
}

// state is what the steadiness rule makes of a step so far.
type state int

const (
	undecided state = iota
	steady
	saturated
)

// assess applies the steadiness and stop rules to a step's signals:
//
//   - saturated: a backlog (the server's queue, or the probe's requests in
//     flight) grew by more than its limit over the whole measured part of
//     the step and is still growing over the last window: arrivals exceed
//     completions, and waiting longer would only make it worse;
//   - steady: TTFT p50 and every backlog seen are flat over the last window;
//   - undecided otherwise, with what still moves.
func assess(s Signals, window time.Duration) (state, string) {
	if grew, what := growing(s.Queue, s.QueueAll, "queue"); grew {
		return saturated, what
	}
	if grew, what := growing(s.InFlight, s.InFlightAll, "requests in flight"); grew {
		return saturated, what
	}
	var moving []string
	switch {
	case !s.TTFT.Seen:
		moving = append(moving, "too few successful requests for a TTFT trend")
	case !s.TTFT.Flat():
		moving = append(moving, fmt.Sprintf("TTFT p50 moved %+.1f ms (limit ±%.1f)", s.TTFT.Change, s.TTFT.Limit))
	}
	if s.Queue.Seen && !s.Queue.Flat() {
		moving = append(moving, fmt.Sprintf("queue moved %+.1f (limit ±%.1f)", s.Queue.Change, s.Queue.Limit))
	}
	if s.InFlight.Seen && !s.InFlight.Flat() {
		moving = append(moving, fmt.Sprintf("in flight moved %+.1f (limit ±%.1f)", s.InFlight.Change, s.InFlight.Limit))
	}
	span := "over the last " + window.String()
	if len(moving) > 0 {
		return undecided, joinWords(moving) + " " + span
	}
	what := fmt.Sprintf("TTFT p50 %+.1f ms", s.TTFT.Change)
	if s.Queue.Seen {
		what += fmt.Sprintf(", queue %+.1f", s.Queue.Change)
	}
	if s.InFlight.Seen {
		what += fmt.Sprintf(", in flight %+.1f", s.InFlight.Change)
	}
	return steady, what + " " + span
}

// growing reports whether a backlog grew over the whole measured part and
// still grows over the last window.
func growing(last, all Trend, name string) (bool, string) {
	if !last.Growing() || !all.Growing() {
		return false, ""
	}
	return true, fmt.Sprintf("%s grew by %.1f over the step (limit %.1f) and is still growing: arrivals exceed completions", name, all.Change, all.Limit)
}

// joinWords joins phrases with commas and a final "and".
func joinWords(ws []string) string {
	switch len(ws) {
	case 0:
		return ""
	case 1:
		return ws[0]
	}
	out := ws[0]
	for _, w := range ws[1 : len(ws)-1] {
		out += ", " + w
	}
	return out + " and " + ws[len(ws)-1]
}
