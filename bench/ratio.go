package bench

import (
	"math"
	"strconv"
)

// Ratio is a probe/bare ratio. NaN means there was nothing to divide by; it
// is written as JSON null and printed as "n/a".
type Ratio float64

// Valid reports whether r is a number.
func (r Ratio) Valid() bool { return !math.IsNaN(float64(r)) && !math.IsInf(float64(r), 0) }

// String formats r as "1.23x".
func (r Ratio) String() string {
	if !r.Valid() {
		return "n/a"
	}
	return strconv.FormatFloat(float64(r), 'f', 2, 64) + "x"
}

// MarshalJSON writes r as a number, or null when it is not one.
func (r Ratio) MarshalJSON() ([]byte, error) {
	if !r.Valid() {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, float64(r), 'f', 4, 64), nil
}
