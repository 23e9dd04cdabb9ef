package sweep

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Mode says how a sweep sets the load.
type Mode string

// The modes.
const (
	// OpenLoop sends Rate requests per second whatever the responses do: a
	// server past its capacity shows a queue that grows without bound.
	OpenLoop Mode = "rate"
	// ClosedLoop runs Concurrency streams, each waiting for its own
	// response: the queue is bounded by the streams, and past capacity only
	// latency grows.
	ClosedLoop Mode = "concurrency"
)

// Load is one step's load: requests per second in open loop, streams in
// closed loop.
type Load struct {
	Mode  Mode    `json:"mode"`
	Value float64 `json:"value"`
}

// Rate is the open-loop rate in requests per second (0 in closed loop).
func (l Load) Rate() float64 {
	if l.Mode != OpenLoop {
		return 0
	}
	return l.Value
}

// Concurrency is the number of closed-loop streams (0 in open loop).
func (l Load) Concurrency() int {
	if l.Mode != ClosedLoop {
		return 0
	}
	return int(math.Round(l.Value))
}

// String formats the load as the markers and tables show it: "12 req/s",
// "8 streams".
func (l Load) String() string {
	if l.Mode == ClosedLoop {
		if n := l.Concurrency(); n == 1 {
			return "1 stream"
		}
		return fmt.Sprintf("%d streams", l.Concurrency())
	}
	return formatRate(l.Value) + " req/s"
}

// formatRate prints a rate with four significant digits and no trailing
// zeros: 12, 118.9, 0.25.
func formatRate(v float64) string {
	return strconv.FormatFloat(roundSig(v, 4), 'f', -1, 64)
}

// roundSig rounds v to n significant digits.
func roundSig(v float64, n int) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	p := math.Pow(10, float64(n)-math.Ceil(math.Log10(math.Abs(v))))
	return math.Round(v*p) / p
}

// ParseLoads reads a comma-separated list of loads ("1,2,4,8" or
// "5,10,20.5").
func ParseLoads(s string) ([]float64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("empty list of loads")
	}
	var out []float64
	for _, item := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(item), 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("load %q: want a number above 0", strings.TrimSpace(item))
		}
		out = append(out, v)
	}
	return out, nil
}

// ParseFraction reads "5%" or "0.05" as a fraction in [0, 1], for
// --stop-errors.
func ParseFraction(s string) (float64, error) {
	num, percent := strings.CutSuffix(strings.TrimSpace(s), "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || math.IsNaN(v) {
		return 0, fmt.Errorf("%q: want a share such as 5%% or 0.05", s)
	}
	if percent {
		v /= 100
	}
	if v < 0 || v > 1 {
		return 0, fmt.Errorf("%q: want a share between 0 and 100%%", s)
	}
	return v, nil
}
