package probe

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// maxTokenLength bounds a parsed length so a typo cannot ask for a prompt of
// billions of tokens.
const maxTokenLength = 1 << 24

// Length is a token-length distribution, as given to --prompt-tokens and
// --output-tokens: a fixed value ("512") or a normal distribution
// ("512:128", mean and standard deviation) clamped to at least 1.
type Length struct {
	Mean   int
	StdDev int // 0 means every sample is Mean
}

// ParseLength parses "N" or "MEAN:STDDEV".
func ParseLength(s string) (Length, error) {
	bad := func() (Length, error) {
		return Length{}, fmt.Errorf("invalid token length %q: want N or MEAN:STDDEV", s)
	}
	meanText, sdText, hasSD := strings.Cut(strings.TrimSpace(s), ":")
	mean, err := strconv.Atoi(strings.TrimSpace(meanText))
	if err != nil || mean < 1 || mean > maxTokenLength {
		return bad()
	}
	l := Length{Mean: mean}
	if hasSD {
		sd, err := strconv.Atoi(strings.TrimSpace(sdText))
		if err != nil || sd < 0 || sd > maxTokenLength {
			return bad()
		}
		l.StdDev = sd
	}
	return l, nil
}

// String formats l the way ParseLength reads it.
func (l Length) String() string {
	if l.StdDev == 0 {
		return strconv.Itoa(l.Mean)
	}
	return fmt.Sprintf("%d:%d", l.Mean, l.StdDev)
}

// Sample draws one length from rng, at least 1 and at most maxTokenLength.
func (l Length) Sample(rng *rand.Rand) int {
	if l.StdDev <= 0 {
		return max(l.Mean, 1)
	}
	v := math.Round(float64(l.Mean) + rng.NormFloat64()*float64(l.StdDev))
	return int(min(max(v, 1), maxTokenLength))
}
