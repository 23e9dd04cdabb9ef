package sweep

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

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
