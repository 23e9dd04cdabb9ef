package aggregate

import (
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

func TestProbeLimitFindings(t *testing.T) {
	t.Parallel()
	now := time.Unix(100, 0)
	ms := time.Millisecond
	tests := []struct {
		name        string
		s           probeSelf
		open        bool
		wantReasons []string
	}{
		{"healthy", probeSelf{CPUPercent: 20, CPUPercentAll: 10, Cores: 2, SchedLagP99: ms, LagSamples: 100}, true, nil},
		{"late open loop", probeSelf{CPUPercent: 20, CPUPercentAll: 10, Cores: 2, SchedLagP99: 40 * ms, LagSamples: 100}, true, []string{limitSchedLag}},
		{"late but closed loop", probeSelf{CPUPercentAll: 10, SchedLagP99: 40 * ms, LagSamples: 100}, false, nil},
		{"late but too few samples", probeSelf{CPUPercentAll: 10, SchedLagP99: 40 * ms, LagSamples: 3}, true, nil},
		{"cpu saturated", probeSelf{CPUPercent: 190, CPUPercentAll: 95, Cores: 2, LagSamples: 100}, false, []string{limitCPU}},
		{"both", probeSelf{CPUPercent: 390, CPUPercentAll: 97.5, Cores: 4, SchedLagP99: 50 * ms, LagSamples: 100}, true, []string{limitSchedLag, limitCPU}},
		{"cpu unknown", probeSelf{CPUPercent: -1, CPUPercentAll: -1}, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := probeLimitFindings(now, tt.s, tt.open, defaultProbeLimits())
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

// The quantiles cover the sends of the last window only.
func TestLagWindow(t *testing.T) {
	t.Parallel()
	var w lagWindow
	t0 := time.Unix(1000, 0)
	for range 100 {
		w.add(t0, time.Second)
	}
	for i := range 100 {
		w.add(t0.Add(10*time.Second), time.Duration(i+1)*time.Millisecond)
	}
	p50, p99, n := w.quantiles(t0.Add(11*time.Second), 5*time.Second)
	if n != 100 || p50 != 50*time.Millisecond || p99 != 99*time.Millisecond {
		t.Fatalf("%d samples, p50 %v, p99 %v; want 100 samples, p50 50ms, p99 99ms", n, p50, p99)
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

// The CPU verdict is a share of the host, says so, and never passes 100%:
// a sample whose interval was timed short (a late tick on a busy process)
// claimed 1010% of one core on two, "505% of all 2 cores".
func TestCPUVerdictIsAShareOfTheHost(t *testing.T) {
	t.Parallel()
	j := NewSelfJudge()
	p := &event.ProbeSample{Time: time.Unix(100, 0), CPUPercent: 1010, Cores: 2, Raw: event.ProbeRawV1}
	got, markers := j.Judge(p)
	if !got.Limited || len(markers) != 1 {
		t.Fatalf("1010%% of one core on 2 cores: limited %v, %d markers; want the cpu limit", got.Limited, len(markers))
	}
	const want = "probe is the bottleneck: it uses 100% of the host's CPU (all 2 cores together)"
	if got.Reason != want || markers[0].Message != want {
		t.Fatalf("reason %q, marker %q; want %q", got.Reason, markers[0].Message, want)
	}
	if v := markers[0].Values["cpu_percent_all"]; v != 100 {
		t.Fatalf("cpu_percent_all %v, want 100", v)
	}
	one := NewSelfJudge()
	got, _ = one.Judge(&event.ProbeSample{Time: time.Unix(100, 0), CPUPercent: 95, Cores: 1, Raw: event.ProbeRawV1})
	if got.Reason != "probe is the bottleneck: it uses 95% of the host's CPU (its one core)" {
		t.Fatalf("one core: reason %q", got.Reason)
	}
	for _, c := range []struct {
		pct   float64
		cores int
		want  float64
	}{{50, 2, 25}, {400, 2, 100}, {-1, 2, -1}, {50, 0, -1}} {
		if got := hostShare(c.pct, c.cores); got != c.want {
			t.Errorf("hostShare(%v, %d) = %v, want %v", c.pct, c.cores, got, c.want)
		}
	}
}
