package probe

import (
	"strings"
	"testing"
	"time"
)

func TestProbeLimitFindings(t *testing.T) {
	t.Parallel()
	now := time.Unix(100, 0)
	ms := time.Millisecond
	tests := []struct {
		name        string
		s           SelfStats
		open        bool
		wantReasons []string
	}{
		{"healthy", SelfStats{CPUPercent: 20, CPUPercentAll: 10, Cores: 2, SchedLagP99: ms, LagSamples: 100}, true, nil},
		{"late open loop", SelfStats{CPUPercent: 20, CPUPercentAll: 10, Cores: 2, SchedLagP99: 40 * ms, LagSamples: 100}, true, []string{limitSchedLag}},
		{"late but closed loop", SelfStats{CPUPercentAll: 10, SchedLagP99: 40 * ms, LagSamples: 100}, false, nil},
		{"late but too few samples", SelfStats{CPUPercentAll: 10, SchedLagP99: 40 * ms, LagSamples: 3}, true, nil},
		{"cpu saturated", SelfStats{CPUPercent: 190, CPUPercentAll: 95, Cores: 2, LagSamples: 100}, false, []string{limitCPU}},
		{"both", SelfStats{CPUPercent: 390, CPUPercentAll: 97.5, Cores: 4, SchedLagP99: 50 * ms, LagSamples: 100}, true, []string{limitSchedLag, limitCPU}},
		{"cpu unknown", SelfStats{CPUPercent: -1, CPUPercentAll: -1}, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := probeLimitFindings(now, tt.s, tt.open, ProbeLimits{})
			if len(got) != len(tt.wantReasons) {
				t.Fatalf("got %d findings %+v, want %v", len(got), got, tt.wantReasons)
			}
			for i, f := range got {
				if f.reason != tt.wantReasons[i] || f.marker.Kind != "probe_limit" || !strings.Contains(f.marker.Message, "bottleneck") || len(f.marker.Values) == 0 {
					t.Fatalf("finding %d = %+v, want reason %s", i, f, tt.wantReasons[i])
				}
			}
		})
	}
}

func TestSelfMonitor(t *testing.T) {
	t.Parallel()
	m := newSelfMonitor(5 * time.Second)
	t0 := time.Unix(1000, 0)
	// Old samples fall out of the window.
	for range 100 {
		m.recordLag(t0, time.Second)
	}
	for i := range 100 {
		m.recordLag(t0.Add(10*time.Second), time.Duration(i+1)*time.Millisecond)
	}
	s := m.stats(t0.Add(11 * time.Second))
	if s.LagSamples != 100 || s.SchedLagP50 != 50*time.Millisecond || s.SchedLagP99 != 99*time.Millisecond {
		t.Fatalf("stats %+v, want 100 samples, p50 50ms, p99 99ms", s)
	}
	// CPU: 0.5 s of CPU over 1 s of wall time is 50% of a core.
	m.sampleCPU(t0, 2*time.Second, true)
	m.sampleCPU(t0.Add(time.Second), 2500*time.Millisecond, true)
	if s := m.stats(t0); s.CPUPercent != 50 || s.CPUPercentAll != 50/float64(s.Cores) {
		t.Fatalf("cpu %v%% (%v%% of all), want 50%%", s.CPUPercent, s.CPUPercentAll)
	}
	m.sampleCPU(t0.Add(2*time.Second), 0, false)
	if s := m.stats(t0); s.CPUPercent != -1 || s.CPUPercentAll != -1 {
		t.Fatalf("unknown cpu reported as %v", s.CPUPercent)
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
