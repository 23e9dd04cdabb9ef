package probe

import (
	"testing"
	"time"
)

func TestSelfMonitor(t *testing.T) {
	t.Parallel()
	m := newSelfMonitor()
	t0 := time.Unix(1000, 0)
	// CPU: 0.5 s of CPU over 1 s of wall time is 50% of a core.
	m.sampleCPU(t0, 2*time.Second, true)
	m.sampleCPU(t0.Add(time.Second), 2500*time.Millisecond, true)
	if s := m.stats(); s.CPUPercent != 50 || s.CPUPercentAll != 50/float64(s.Cores) {
		t.Fatalf("cpu %v%% (%v%% of all), want 50%%", s.CPUPercent, s.CPUPercentAll)
	}
	m.sampleCPU(t0.Add(2*time.Second), 0, false)
	if s := m.stats(); s.CPUPercent != -1 || s.CPUPercentAll != -1 {
		t.Fatalf("unknown cpu reported as %v", s.CPUPercent)
	}
	// A share above all the cores is an artefact of the interval's timing
	// and is capped at them.
	m.sampleCPU(t0.Add(3*time.Second), 0, true)
	m.sampleCPU(t0.Add(4*time.Second), 100*time.Second, true)
	if s := m.stats(); s.CPUPercent != 100*float64(s.Cores) || s.CPUPercentAll != 100 {
		t.Fatalf("100 s of CPU in 1 s: %v%% (%v%% of all), want all %d cores", s.CPUPercent, s.CPUPercentAll, s.Cores)
	}
	if cpu, ok := processCPUTime(); ok && cpu <= 0 {
		t.Fatalf("process cpu time %s", cpu)
	}
}

func TestMarkerGate(t *testing.T) {
	t.Parallel()
	g := newMarkerGate(10 * time.Second)
	t0 := time.Unix(0, 0)
	if !g.allow("a", t0) || g.allow("a", t0.Add(time.Second)) || !g.allow("b", t0) || !g.allow("a", t0.Add(11*time.Second)) {
		t.Fatalf("gate does not allow one marker per reason per cooldown")
	}
}
