package aggregate

import (
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// withSession starts a run with a session header of the given load mode.
func withSession(a *Aggregator, mode string, rate float64) {
	a.Add(event.NewSession(&event.Session{Time: base(), Target: "http://x", Load: event.Load{Mode: mode, Rate: rate}}))
}

func probeSample(at time.Time, limited bool) *event.ProbeSample {
	p := &event.ProbeSample{Time: at, InFlight: 4, CPUPercent: 30}
	if limited {
		p.Limited, p.Reason = true, "probe is the bottleneck: it uses 95% of the host's CPU (all 2 cores together)"
	}
	return p
}

// The verdict rests on the evidence its load model has, and every held
// probe silences "the server, not the probe, is the limit".
func TestProbeVerdict(t *testing.T) {
	t.Parallel()
	rising := func(i int) float64 { return float64(i) }
	two := func(int) int { return 2 }
	for _, tc := range []struct {
		name      string
		mode      string
		rate      float64
		lag       time.Duration
		starved   int
		starvedMS float64 // each starved pause's shared time; 30 ms unless set
		limited   bool
		want      ProbeState
		reason    string
		insight   string // the limit insight's prefix ("" for none)
		noLagFig  bool   // no lag figure may be stated
	}{
		{name: "open loop on time", mode: "open", rate: 2, want: ProbeKeptPace, reason: "sched-lag p99 0.00 ms",
			insight: "the server, not the probe, is the limit"},
		{name: "open loop late", mode: "open", rate: 2, lag: 40 * time.Millisecond, want: ProbeHeld,
			reason: "up to 40.00 ms late", insight: "the probe is the limit"},
		{name: "trace late", mode: "trace", lag: 52 * time.Millisecond, want: ProbeHeld,
			reason: "up to 52.00 ms late", insight: "the probe is the limit"},
		{name: "closed loop: a lag is not measured", mode: "closed", lag: 40 * time.Millisecond, want: ProbeKeptPace,
			reason: "lag not measured", insight: "the server, not the probe, is the limit", noLagFig: true},
		{name: "closed loop, starved pauses, a brief share of the run", mode: "closed", starved: 3, want: ProbePaused,
			reason: "3 shared pauses (90 ms in all", insight: "the probe paused", noLagFig: true},
		{name: "closed loop, starved pauses, a material share of the run", mode: "closed", starved: 3, starvedMS: 400, want: ProbeHeld,
			reason: "the streams' 3 shared pauses (1200 ms in all, longest gap 40.0 ms) were its own, 1.3% of the run", insight: "the probe is the limit", noLagFig: true},
		{name: "open loop on time, one starved pause", mode: "open", rate: 2, starved: 1, want: ProbePaused,
			reason: "the streams' 1 shared pause (30 ms in all, longest gap 40.0 ms) was its own: its goroutines ran late, 0.03% of the run (the limit is 1.0%)", insight: "the probe paused"},
		{name: "open loop late, one starved pause", mode: "open", rate: 2, lag: 40 * time.Millisecond, starved: 1, want: ProbeHeld,
			reason: "up to 40.00 ms late", insight: "the probe is the limit"},
		{name: "closed loop, the probe's cpu", mode: "closed", limited: true, want: ProbeHeld,
			reason: "it reported itself the limit", insight: "the probe is the limit", noLagFig: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := New(Config{})
			withSession(a, tc.mode, tc.rate)
			loadWithQueue(a, rising, two, tc.lag)
			gap := tc.starvedMS
			if gap == 0 {
				gap = 30
			}
			for range tc.starved {
				a.Add(event.NewMarker(stallMarker(event.StallProbeStarved, 1, gap, 40)))
			}
			a.Add(event.NewProbe(probeSample(base().Add(80*time.Second), tc.limited)))
			s := a.Snapshot(base().Add(90 * time.Second))
			v := s.Verdict
			if v.State != tc.want || !strings.Contains(v.Reason, tc.reason) {
				t.Fatalf("verdict %s %q, want %s with %q", v.State, v.Reason, tc.want, tc.reason)
			}
			checkSurfacesAgree(t, s)
			if _, ok := insightWith(s.Insights, tc.insight); !ok {
				t.Errorf("no insight %q in %v", tc.insight, s.Insights)
			}
			if tc.noLagFig {
				for _, m := range s.Insights {
					if strings.Contains(m.Message, "sched-lag p99") || strings.Contains(m.Message, "scheduling-lag p99") {
						t.Errorf("a lag the load model does not measure is stated: %s", m.Message)
					}
				}
			}
		})
	}
}

// checkSurfacesAgree checks that the status line, the insights and the
// summary (text and JSON) say the snapshot's verdict, and nothing against it.
func checkSurfacesAgree(t *testing.T, s Snapshot) {
	t.Helper()
	v := s.Verdict
	line := StatusLine(s)
	if held := strings.Contains(line, "LATSCOPE IS THE LIMIT"); held != v.Held() {
		t.Errorf("status line %q against the verdict %s", line, v.State)
	}
	if paused := strings.Contains(line, "latscope paused: "+v.Reason); paused != (v.State == ProbePaused) {
		t.Errorf("status line %q against the verdict %s", line, v.State)
	}
	_, probeLimit := insightWith(s.Insights, "the probe is the limit")
	_, probePaused := insightWith(s.Insights, "the probe paused")
	_, serverLimit := insightWith(s.Insights, "the server, not the probe, is the limit")
	if probeLimit != v.Held() || probePaused != (v.State == ProbePaused) || serverLimit && v.State != ProbeKeptPace {
		t.Errorf("insights %v against the verdict %s", s.Insights, v.State)
	}
	var table strings.Builder
	if err := WriteTable(&table, s.Summary()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "Probe: "+v.VerdictText()) {
		t.Errorf("the summary lacks the verdict %q:\n%s", v.VerdictText(), table.String())
	}
	var js strings.Builder
	if err := WriteJSON(&js, s.Summary()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"state": "`+string(v.State)+`"`) {
		t.Errorf("the JSON summary lacks the verdict's state %s", v.State)
	}
}

// Without a probe sample or a measured lag there is no verdict to state:
// no badge claims either way and no insight names a limit.
func TestProbeVerdictUnknown(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	withSession(a, "closed", 0)
	loadWithQueue(a, func(i int) float64 { return float64(i) }, func(int) int { return 2 }, 0)
	s := a.Snapshot(base().Add(90 * time.Second))
	if s.Verdict.State != ProbeUnknown {
		t.Fatalf("verdict %+v, want unknown", s.Verdict)
	}
	checkSurfacesAgree(t, s)
	for _, m := range s.Insights {
		if strings.Contains(m.Message, "is the limit") {
			t.Errorf("a limit stated without evidence: %s", m.Message)
		}
	}
}
