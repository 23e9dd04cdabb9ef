package tui

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// ms formats a duration given in milliseconds with about three significant
// digits, switching to seconds past ten seconds: "0.42", "9.81", "312",
// "12.4s".
func ms(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "-"
	case a >= 10000:
		return strconv.FormatFloat(v/1000, 'f', 1, 64) + "s"
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// msUnit formats milliseconds with their unit: "842 ms", "3.07 s".
func msUnit(v float64) string {
	if math.Abs(v) >= 1000 {
		return strconv.FormatFloat(v/1000, 'f', 2, 64) + " s"
	}
	return ms(v) + " ms"
}

// count formats a count compactly: 2508, 318.5k, 1.25M.
func count(n int64) string {
	switch {
	case n >= 10_000_000:
		return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + "M"
	case n >= 1_000_000:
		return strconv.FormatFloat(float64(n)/1e6, 'f', 2, 64) + "M"
	case n >= 100_000:
		return strconv.FormatFloat(float64(n)/1e3, 'f', 1, 64) + "k"
	default:
		return strconv.FormatInt(n, 10)
	}
}

// rate formats a per-second rate: 41.8, 5350, 12.3k.
func rate(v float64) string {
	switch {
	case v >= 100_000:
		return strconv.FormatFloat(v/1000, 'f', 0, 64) + "k"
	case v >= 10_000:
		return strconv.FormatFloat(v/1000, 'f', 1, 64) + "k"
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	default:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
}

// clock formats a time since the session started as mm:ss.d, with hours
// when there are any: "04:11.8", "1:04:11.8".
func clock(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	tenths := int64(d / (100 * time.Millisecond))
	h, rest := tenths/36000, tenths%36000
	m, rest := rest/600, rest%600
	s, t := rest/10, rest%10
	if h > 0 {
		return fmt.Sprintf("%d:%02d:%02d.%d", h, m, s, t)
	}
	return fmt.Sprintf("%02d:%02d.%d", m, s, t)
}

// elapsed formats a session's length as hh:mm:ss.
func elapsed(d time.Duration) string {
	sec := int64(d / time.Second)
	return fmt.Sprintf("%02d:%02d:%02d", sec/3600, sec/60%60, sec%60)
}

// gib formats bytes in GiB with one decimal.
func gib(b uint64) string { return strconv.FormatFloat(float64(b)/(1<<30), 'f', 1, 64) }

// pct formats a fraction 0..1 as a percentage with one decimal.
func pct(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" }

// elapsedShort formats a duration as m:ss, or h:mm:ss past an hour: "0:31",
// "12:04", "1:02:03".
func elapsedShort(d time.Duration) string {
	sec := max(int64(d/time.Second), 0)
	if sec >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", sec/3600, sec/60%60, sec%60)
	}
	return fmt.Sprintf("%d:%02d", sec/60, sec%60)
}
