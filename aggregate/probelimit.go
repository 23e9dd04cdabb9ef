package aggregate

import (
	"fmt"
	"slices"
	"time"

	"github.com/latscope/latscope/event"
)

// probeLimits are the thresholds past which the probe is the bottleneck by
// its own raw samples.
type probeLimits struct {
	SchedLagP99 time.Duration // the open loop's sends late by this at p99 (event.ProbeLagLimit)
	CPUShare    float64       // the probe's CPU, as a share of all the machine's cores (0.9)
	// Cooldown is the least time between two markers for the same reason,
	// so a struggling probe does not flood the markers (10 s).
	Cooldown time.Duration
	// LagWindow is how far back the scheduling lag's quantiles look (5 s).
	LagWindow time.Duration
}

func defaultProbeLimits() probeLimits {
	return probeLimits{SchedLagP99: event.ProbeLagLimit, CPUShare: 0.9, Cooldown: 10 * time.Second, LagWindow: 5 * time.Second}
}

// probeSelf is the probe's view of itself at one sample, as judged from
// its raw figures.
type probeSelf struct {
	// CPUPercent is the probe's CPU use over its last interval, in percent
	// of one core; CPUPercentAll the same as a share of all the machine's
	// cores. Both are -1 where unknown.
	CPUPercent    float64
	CPUPercentAll float64
	Cores         int
	// SchedLagP50 and SchedLagP99 are how late the open loop's sends were
	// over the last LagWindow, and LagSamples how many sends that was.
	SchedLagP50, SchedLagP99 time.Duration
	LagSamples               int
}

// Reasons a probe_limit marker gives.
const (
	limitSchedLag = "sched_lag"
	limitCPU      = "cpu"
)

// limitFinding is one way the probe is the bottleneck, with its marker.
type limitFinding struct {
	reason string
	marker event.Marker
}

// probeLimitFindings says in which ways the probe itself is the bottleneck
// according to s. It is a pure function of its inputs.
func probeLimitFindings(now time.Time, s probeSelf, openLoop bool, lim probeLimits) []limitFinding {
	var out []limitFinding
	// A handful of samples is too few for a p99 to mean anything.
	if openLoop && s.LagSamples >= 20 && s.SchedLagP99 > lim.SchedLagP99 {
		out = append(out, probeLimitMarker(now, limitSchedLag,
			fmt.Sprintf("probe is the bottleneck: open-loop sends are late by %s at p99 (limit %s); sent load is below the asked rate",
				s.SchedLagP99.Round(time.Microsecond), lim.SchedLagP99),
			map[string]float64{
				"sched_lag_p99_ms": msOf(s.SchedLagP99),
				"sched_lag_p50_ms": msOf(s.SchedLagP50),
				"limit_ms":         msOf(lim.SchedLagP99),
				"cpu_percent":      s.CPUPercent,
			}))
	}
	if s.CPUPercentAll >= 0 && s.CPUPercentAll/100 >= lim.CPUShare {
		out = append(out, probeLimitMarker(now, limitCPU,
			cpuVerdict(s),
			map[string]float64{
				"cpu_percent":      s.CPUPercent,
				"cpu_percent_all":  s.CPUPercentAll,
				"cores":            float64(s.Cores),
				"sched_lag_p99_ms": msOf(s.SchedLagP99),
			}))
	}
	return out
}

// cpuVerdict says how much of the host's CPU the probe used: a share of
// all its cores together, never above 100% of them (CPUPercentAll is
// bounded by hostShare), and how many cores that is.
func cpuVerdict(s probeSelf) string {
	if s.Cores > 1 {
		return fmt.Sprintf("probe is the bottleneck: it uses %.0f%% of the host's CPU (all %d cores together)", s.CPUPercentAll, s.Cores)
	}
	return fmt.Sprintf("probe is the bottleneck: it uses %.0f%% of the host's CPU (its one core)", s.CPUPercentAll)
}

// hostShare is a process's CPU use in percent of one core (200 = two
// cores busy) as a share of all the host's cores, in percent: at most 100,
// however the interval it was measured over was timed; -1 where either is
// unknown.
func hostShare(cpuPercent float64, cores int) float64 {
	if cpuPercent < 0 || cores <= 0 {
		return -1
	}
	return min(cpuPercent/float64(cores), 100)
}

func probeLimitMarker(now time.Time, reason, msg string, values map[string]float64) limitFinding {
	return limitFinding{reason: reason, marker: event.Marker{
		Time: now, Kind: event.MarkerProbeLimit, Source: "probe", Message: msg, Values: values,
	}}
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// lagRingSize bounds the scheduling-lag samples kept for the quantiles.
const lagRingSize = 4096

// lagWindow keeps the latest open-loop sends' lateness for the quantiles
// over the recent window.
type lagWindow struct {
	lags  [lagRingSize]lagSample
	next  int
	count int
}

type lagSample struct {
	at  time.Time
	lag time.Duration
}

// add notes that a send at `at` went out lag late.
func (w *lagWindow) add(at time.Time, lag time.Duration) {
	w.lags[w.next] = lagSample{at: at, lag: max(lag, 0)}
	w.next = (w.next + 1) % lagRingSize
	w.count = min(w.count+1, lagRingSize)
}

// quantiles returns the p50 and p99 of the sends within window before now,
// and how many there were.
func (w *lagWindow) quantiles(now time.Time, window time.Duration) (p50, p99 time.Duration, n int) {
	cutoff := now.Add(-window)
	recent := make([]time.Duration, 0, w.count)
	for i := range w.count {
		if l := w.lags[i]; !l.at.Before(cutoff) {
			recent = append(recent, l.lag)
		}
	}
	slices.Sort(recent)
	return quantileSorted(recent, 0.50), quantileSorted(recent, 0.99), len(recent)
}

// quantileSorted returns the q-quantile (nearest rank) of sorted values.
func quantileSorted(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// markerGate lets at most one marker per reason through per cooldown, on
// event time.
type markerGate struct {
	cooldown time.Duration
	last     map[string]time.Time
}

func newMarkerGate(cooldown time.Duration) markerGate {
	return markerGate{cooldown: cooldown, last: map[string]time.Time{}}
}

func (g *markerGate) allow(reason string, now time.Time) bool {
	if t, ok := g.last[reason]; ok && now.Sub(t) < g.cooldown {
		return false
	}
	g.last[reason] = now
	return true
}
