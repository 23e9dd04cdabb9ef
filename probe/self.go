package probe

import (
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/latscope/latscope/event"
)

// SelfStats is what the probe measures of itself: its CPU use and its
// requests in flight. Whether it, rather than the server, is the limit is
// the aggregator's judgement, from the raw samples the probe emits
// (event.ProbeSample, event.ProbeRawV1).
type SelfStats struct {
	// CPUPercent is the probe process's CPU use over the last interval, in
	// percent of one core (200 = two cores busy); CPUPercentAll is the same
	// as a share of all the machine's cores. Both are -1 where the platform
	// cannot tell.
	CPUPercent    float64
	CPUPercentAll float64
	Cores         int
	InFlight      int
	MaxInFlight   int
}

// selfMonitor tracks the probe's CPU use. It is safe for concurrent use:
// the monitor loop samples CPU, and the status line reads stats.
type selfMonitor struct {
	cores int

	mu       sync.Mutex
	cpuPct   float64
	lastCPU  time.Duration
	lastWall time.Time
}

func newSelfMonitor() *selfMonitor {
	return &selfMonitor{cores: runtime.NumCPU(), cpuPct: -1}
}

// sampleCPU takes the process's cumulative CPU time at now and updates the
// CPU use over the time since the previous sample. now must be when cpu
// was read, not when a ticker meant it to be: a tick delivered late to a
// busy process stamps an interval shorter than the CPU it holds, and the
// share came out at 505% of two cores. A share above all the cores is
// such an artefact still and is capped at them.
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
			if m.cores > 0 {
				m.cpuPct = min(m.cpuPct, 100*float64(m.cores))
			}
		}
	}
	m.lastCPU, m.lastWall = cpu, now
}

// stats returns the current figures (InFlight and MaxInFlight are the
// Runner's to fill in).
func (m *selfMonitor) stats() SelfStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := SelfStats{CPUPercent: m.cpuPct, CPUPercentAll: -1, Cores: m.cores}
	if m.cpuPct >= 0 && m.cores > 0 {
		s.CPUPercentAll = min(m.cpuPct/float64(m.cores), 100)
	}
	return s
}

// limitMaxInFlight is the reason of the probe_limit marker the open loop
// sends when it hits its in-flight cap.
const limitMaxInFlight = "max_in_flight"

// maxInFlightCooldown is the least time between two max-in-flight markers,
// so a struggling probe does not flood the stream.
const maxInFlightCooldown = 10 * time.Second

// maxInFlightMarker says the open loop hit its in-flight cap: every worker
// was busy when a request was due, so from now on requests go out late
// (their lateness is recorded as sched lag). It is what the dispatcher saw,
// not a judgement of the figures.
func maxInFlightMarker(now time.Time, inFlight int, rate float64) event.Marker {
	return event.Marker{
		Time: now, Kind: event.MarkerProbeLimit, Source: "probe",
		Message: fmt.Sprintf("probe cannot keep up: %d requests in flight (the maximum) at %.4g req/s; further requests are sent late",
			inFlight, rate),
		Values: map[string]float64{"in_flight": float64(inFlight), "rate": rate},
	}
}

// markerGate lets at most one marker per reason through per cooldown. It is
// safe for concurrent use.
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
