package bench

import (
	"math"
	"slices"
	"time"
)

// FrameErrors compares what a client saw of one request with the server's
// ground truth (the flush time of each content frame). The TTFT error is the
// client's arrival time of frame 0 minus the server's flush time of frame 0;
// each ITL error is |client gap - server gap| for a consecutive pair of
// frames. Only the frames both sides have are compared; ok is false when
// either side has none.
func FrameErrors(start time.Time, arrivals []time.Duration, truth []time.Time) (ttft time.Duration, itl []time.Duration, ok bool) {
	n := min(len(arrivals), len(truth))
	if n == 0 {
		return 0, nil, false
	}
	ttft = start.Add(arrivals[0]).Sub(truth[0])
	itl = make([]time.Duration, 0, n-1)
	for i := 1; i < n; i++ {
		clientGap := arrivals[i] - arrivals[i-1]
		serverGap := truth[i].Sub(truth[i-1])
		itl = append(itl, absDuration(clientGap-serverGap))
	}
	return ttft, itl, true
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// ErrorStats summarises absolute errors in microseconds.
type ErrorStats struct {
	N      int     `json:"n"`
	MeanUs float64 `json:"mean_us"`
	P50Us  float64 `json:"p50_us"`
	P99Us  float64 `json:"p99_us"`
	MaxUs  float64 `json:"max_us"`
}

// SummarizeAbs returns the mean, p50 and p99 (nearest rank) and max of |errs|.
// It sorts a copy; errs is left as it was.
func SummarizeAbs(errs []time.Duration) ErrorStats {
	if len(errs) == 0 {
		return ErrorStats{}
	}
	abs := make([]time.Duration, len(errs))
	var sum float64
	for i, e := range errs {
		abs[i] = absDuration(e)
		sum += float64(abs[i])
	}
	slices.Sort(abs)
	return ErrorStats{
		N:      len(abs),
		MeanUs: sum / float64(len(abs)) / 1e3,
		P50Us:  float64(nearestRank(abs, 50)) / 1e3,
		P99Us:  float64(nearestRank(abs, 99)) / 1e3,
		MaxUs:  float64(abs[len(abs)-1]) / 1e3,
	}
}

// nearestRank returns the p-th percentile of sorted values by the nearest-rank
// method: the smallest value with at least p% of the values at or below it.
func nearestRank(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// ratio returns a/b, or NaN when b is zero (a ratio to nothing is no ratio).
func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}
