package stall

import (
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// detectWithHost feeds recs, the probe's late moments and the host's
// pressure to a detector (of a server whose design makes the signatures
// evidence, as vLLM's) and returns every marker.
func detectWithHost(t *testing.T, recs []*event.Request, host []HostPressure, starved ...interval) []event.Marker {
	t.Helper()
	d := New(Config{Server: vllmLike})
	for _, s := range starved {
		d.Starved(s.from, s.to)
	}
	for _, h := range host {
		d.Host(h)
	}
	var got []event.Marker
	for _, r := range recs {
		got = append(got, d.Add(r)...)
	}
	return append(got, d.Flush()...)
}

// TestStallClientHost: a pause in an interval of a saturated client host
// is the host's, whatever else the streams show (a burst, a first token,
// the probe's own lateness); without that pressure, or with latscope the
// load itself, the cause is what it was.
func TestStallClientHost(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	at := func(d time.Duration) time.Time { return stallT0.Add(d) }
	second := func(psi, steal, self float64) []HostPressure {
		return []HostPressure{{From: at(-400 * ms), To: at(600 * ms), PSI: psi, Steal: steal, SelfCPU: self}}
	}
	tests := []struct {
		name    string
		recs    []*event.Request
		host    []HostPressure
		starved []interval
		want    event.StallCause
		text    string
	}{
		{"a burst after it on a saturated host", withBurst(fourPausing(30 * ms)), second(0.38, 0, 0.07),
			nil, event.StallClientHost, "client host saturated (PSI cpu some 38%): 4 streams paused together"},
		{"a first token after it on a saturated host", append(fourPausing(30*ms), oneRequest("new", 150*ms, 151*ms, 245*ms, 3)), second(0.38, 0, 0.07),
			nil, event.StallClientHost, "(PSI cpu some 38%, steal 0%, latscope 7% of a core)"},
		{"the probe ran late because the host was busy", fourPausing(30 * ms), second(0.38, -1, -1),
			[]interval{{at(195 * ms), at(250 * ms)}}, event.StallClientHost, "not the server's"},
		{"steal alone", withBurst(fourPausing(30 * ms)), second(-1, 0.2, 0.07),
			nil, event.StallClientHost, "client host saturated (steal 20%)"},
		{"a calm host: the cause stands", withBurst(fourPausing(30 * ms)), second(0.02, 0, 0.07),
			nil, event.StallFrontEndBlock, "front-end block: "},
		{"a calm host, a first token: the cause stands", append(fourPausing(30*ms), oneRequest("new", 150*ms, 151*ms, 245*ms, 3)), second(0.02, 0.01, 0.07),
			nil, event.StallPrefillInterference, "prefill interference: "},
		{"latscope is the load: the probe's own verdict stands", fourPausing(30 * ms), second(0.5, 0, 0.9),
			[]interval{{at(195 * ms), at(250 * ms)}}, event.StallProbeStarved, "probe starved: "},
		{"no host sample over the pause", withBurst(fourPausing(30 * ms)),
			[]HostPressure{{From: at(-2 * time.Second), To: at(-time.Second), PSI: 0.9, Steal: 0, SelfCPU: 0}},
			nil, event.StallFrontEndBlock, "front-end block: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := detectWithHost(t, tt.recs, tt.host, tt.starved...)
			if len(got) != 1 {
				t.Fatalf("got %d markers, want 1: %+v", len(got), got)
			}
			if m := got[0]; m.Cause != tt.want || !strings.Contains(m.Message, tt.text) {
				t.Fatalf("marker %q (cause %s), want cause %s with %q", m.Message, m.Cause, tt.want, tt.text)
			}
		})
	}
}

func TestHostPressureOf(t *testing.T) {
	t.Parallel()
	psi, self := 0.38, 0.07
	h := &event.HostSample{Time: stallT0, Interval: time.Second, Available: true, PSISome: &psi, SelfCPU: &self}
	p, ok := HostPressureOf(h)
	if !ok || !p.From.Equal(stallT0.Add(-time.Second)) || p.PSI != 0.38 || p.Steal != -1 || p.SelfCPU != 0.07 {
		t.Fatalf("got %+v, %v", p, ok)
	}
	for _, no := range []*event.HostSample{nil, {Time: stallT0, Available: true, PSISomeAvg10: &psi},
		{Time: stallT0, Interval: time.Second, Available: true}, {Time: stallT0, Interval: time.Second, PSISome: &psi}} {
		if _, ok := HostPressureOf(no); ok {
			t.Errorf("%+v has a pressure", no)
		}
	}
}
