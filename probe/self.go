package probe

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/latscope/latscope/event"
)

// SelfStats is the probe's view of itself, for the status line: is the
// probe keeping its schedule, or is it the bottleneck?
type SelfStats struct {
	// CPUPercent is the probe process's CPU use over the last interval, in
	// percent of one core (200 = two cores busy); CPUPercentAll is the same
	// as a share of all the machine's cores. Both are -1 where the platform
	// cannot tell.
	CPUPercent    float64
	CPUPercentAll float64
	Cores         int
	// SchedLagP50 and SchedLagP99 are how late open-loop requests were
	// dispatched relative to their schedule, over the last LagWindow.
	SchedLagP50, SchedLagP99 time.Duration
	LagSamples               int
	InFlight                 int
	MaxInFlight              int
}

// ProbeLimits are the thresholds past which the probe reports itself as the
// bottleneck. Zero fields take the defaults.
type ProbeLimits struct {
	SchedLagP99 time.Duration // default event.ProbeLagLimit (open loop only)
	CPUShare    float64       // share of all cores, default 0.9
	// Cooldown is the least time between two markers for the same reason
	// (default 10 s), so a struggling probe does not flood the stream.
	Cooldown time.Duration
}

func (l ProbeLimits) withDefaults() ProbeLimits {
	if l.SchedLagP99 <= 0 {
		l.SchedLagP99 = event.ProbeLagLimit
	}
	if l.CPUShare <= 0 {
		l.CPUShare = 0.9
	}
	if l.Cooldown <= 0 {
		l.Cooldown = 10 * time.Second
	}
	return l
}

// lagRingSize bounds the scheduling-lag samples kept for the percentiles.
const lagRingSize = 4096

// selfMonitor tracks the probe's CPU use and scheduling lag. It is safe for
// concurrent use: workers record lags, the monitor loop samples CPU, and the
// status line reads stats.
type selfMonitor struct {
	window time.Duration
	cores  int

	mu       sync.Mutex
	lags     [lagRingSize]lagSample
	lagNext  int
	lagCount int
	cpuPct   float64
	lastCPU  time.Duration
	lastWall time.Time
}

type lagSample struct {
	at  time.Time
	lag time.Duration
}

func newSelfMonitor(window time.Duration) *selfMonitor {
	return &selfMonitor{window: window, cores: runtime.NumCPU(), cpuPct: -1}
}

// recordLag notes that a request due at intended was dispatched at now.
func (m *selfMonitor) recordLag(now time.Time, lag time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lags[m.lagNext] = lagSample{at: now, lag: max(lag, 0)}
	m.lagNext = (m.lagNext + 1) % lagRingSize
	m.lagCount = min(m.lagCount+1, lagRingSize)
}

// sampleCPU takes the process's cumulative CPU time at now and updates the
// CPU use over the time since the previous sample.
func (m *selfMonitor) sampleCPU(now time.Time, cpu time.Duration, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !ok {
		m.cpuPct = -1
		return
	}
	if !m.lastWall.IsZero() {
		if wall := now.Sub(m.lastWall); wall > 0 {
			m.cpuPct = 100 * float64(cpu-m.lastCPU) / float64(wall)
		}
	}
	m.lastCPU, m.lastWall = cpu, now
}

// stats returns the current figures (InFlight and MaxInFlight are the
// Runner's to fill in).
func (m *selfMonitor) stats(now time.Time) SelfStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := SelfStats{CPUPercent: m.cpuPct, CPUPercentAll: -1, Cores: m.cores}
	if m.cpuPct >= 0 && m.cores > 0 {
		s.CPUPercentAll = m.cpuPct / float64(m.cores)
	}
	cutoff := now.Add(-m.window)
	recent := make([]time.Duration, 0, m.lagCount)
	for i := range m.lagCount {
		if l := m.lags[i]; !l.at.Before(cutoff) {
			recent = append(recent, l.lag)
		}
	}
	slices.Sort(recent)
	s.LagSamples = len(recent)
	s.SchedLagP50 = quantileSorted(recent, 0.50)
	s.SchedLagP99 = quantileSorted(recent, 0.99)
	return s
}

// quantileSorted returns the q-quantile (nearest rank) of sorted values.
func quantileSorted(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Reasons a probe_limit marker gives.
const (
	limitSchedLag    = "sched_lag"
	limitCPU         = "cpu"
	limitMaxInFlight = "max_in_flight"
)

// limitFinding is one way the probe is the bottleneck, with its marker.
type limitFinding struct {
	reason string
	marker event.Marker
}

// probeLimitFindings says in which ways the probe itself is the bottleneck
// according to s. It is a pure function of its inputs.
func probeLimitFindings(now time.Time, s SelfStats, openLoop bool, lim ProbeLimits) []limitFinding {
	lim = lim.withDefaults()
	var out []limitFinding
	// A handful of samples is too few for a p99 to mean anything.
	if openLoop && s.LagSamples >= 20 && s.SchedLagP99 > lim.SchedLagP99 {
		out = append(out, probeLimitMarker(now, limitSchedLag,
			fmt.Sprintf("probe is the bottleneck: open-loop sends are late by %s at p99 (limit %s); sent load is below the asked rate",
				s.SchedLagP99.Round(time.Microsecond), lim.SchedLagP99),
			map[string]float64{
				"sched_lag_p99_ms": ms(s.SchedLagP99),
				"sched_lag_p50_ms": ms(s.SchedLagP50),
				"limit_ms":         ms(lim.SchedLagP99),
				"cpu_percent":      s.CPUPercent,
			}))
	}
	if s.CPUPercentAll >= 0 && s.CPUPercentAll/100 >= lim.CPUShare {
		out = append(out, probeLimitMarker(now, limitCPU,
			fmt.Sprintf("probe is the bottleneck: it uses %.0f%% of all %d cores", s.CPUPercentAll, s.Cores),
			map[string]float64{
				"cpu_percent":      s.CPUPercent,
				"cpu_percent_all":  s.CPUPercentAll,
				"cores":            float64(s.Cores),
				"sched_lag_p99_ms": ms(s.SchedLagP99),
			}))
	}
	return out
}

// maxInFlightFinding says the open loop hit its in-flight cap: from now on
// requests go out late (their lateness is recorded as sched lag).
func maxInFlightFinding(now time.Time, inFlight int, rate float64) limitFinding {
	return probeLimitMarker(now, limitMaxInFlight,
		fmt.Sprintf("probe cannot keep up: %d requests in flight (the maximum) at %.4g req/s; further requests are sent late",
			inFlight, rate),
		map[string]float64{"in_flight": float64(inFlight), "rate": rate})
}

func probeLimitMarker(now time.Time, reason, msg string, values map[string]float64) limitFinding {
	return limitFinding{reason: reason, marker: event.Marker{
		Time: now, Kind: event.MarkerProbeLimit, Source: "probe", Message: msg, Values: values,
	}}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// markerGate lets at most one marker per reason through per cooldown. It is
// safe for concurrent use (the dispatcher and the monitor share one).
type markerGate struct {
	cooldown time.Duration
	mu       sync.Mutex
	last     map[string]time.Time
}

func newMarkerGate(cooldown time.Duration) *markerGate {
	return &markerGate{cooldown: cooldown, last: map[string]time.Time{}}
}

func (g *markerGate) allow(reason string, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t, ok := g.last[reason]; ok && now.Sub(t) < g.cooldown {
		return false
	}
	g.last[reason] = now
	return true
}
