package aggregate

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// hostSample is a host collector's sample at t over the second before it.
func hostSample(t time.Time, psi, self float64, runQueue int) *event.HostSample {
	steal := 0.0
	return &event.HostSample{Time: t, Interval: time.Second, Available: true, Cores: 2,
		PSISome: &psi, PSISomeAvg10: &psi, Steal: &steal, SelfCPU: &self, RunQueue: &runQueue}
}

// withHost puts a host sample for each second from t0-1s to t0+8s into
// evs, before the probe's samples of the same time.
func withHost(t0 time.Time, evs []event.Event, psi, self float64) []event.Event {
	first := psi
	out := []event.Event{event.NewHost(&event.HostSample{Time: t0.Add(-time.Second), Available: true, Cores: 2, PSISomeAvg10: &first})}
	for _, ev := range evs {
		if ev.Probe != nil {
			out = append(out, event.NewHost(hostSample(ev.Probe.Time, psi, self, 9)))
		}
		out = append(out, ev)
	}
	return out
}

func judgeAll(evs []event.Event) Snapshot {
	a := New(Config{})
	for _, ev := range evs {
		a.Add(ev)
	}
	return a.Final()
}

// TestHostPressureNamesTheHost: a shared pause on a saturated client host
// is the host's, and the verdict names the host, not latscope; the same
// pause on a calm host keeps its cause and verdict.
func TestHostPressureNamesTheHost(t *testing.T) {
	t.Parallel()
	t0 := base()
	busy := judgeAll(withHost(t0, rawStream(t0, true), 0.38, 0.07))
	ms := stallMarkers(busy)
	if len(ms) != 1 || ms[0].Cause != event.StallClientHost || !strings.HasPrefix(ms[0].Message, "client host saturated (PSI cpu some 38%)") {
		t.Fatalf("stall markers %+v: want one pause of the client host", ms)
	}
	v := busy.Verdict
	if v.State != ProbeHostBusy || v.Held() || !strings.HasPrefix(v.Reason, "the client host is saturated (PSI cpu some 38%): timings include its delays") {
		t.Fatalf("verdict %+v: want the host named", v)
	}
	for _, text := range []string{StatusLine(busy), v.VerdictText()} {
		if strings.Contains(text, "LATSCOPE IS THE LIMIT") || !strings.Contains(text, "client host is saturated") {
			t.Errorf("%q: want the host named, not latscope", text)
		}
	}
	if line := StatusLine(busy); !strings.Contains(line, "host: PSI cpu 38% · steal 0% · run queue 9/2 · latscope 7% of a core") {
		t.Errorf("status line %q: want the host's figures", line)
	}

	calm := judgeAll(withHost(t0, rawStream(t0, true), 0.02, 0.07))
	if ms := stallMarkers(calm); len(ms) != 1 || ms[0].Cause != event.StallProbeStarved {
		t.Fatalf("calm host: stall markers %+v, want the probe's pause", ms)
	}
	if calm.Verdict.State == ProbeHostBusy || strings.Contains(StatusLine(calm), "host:") {
		t.Errorf("calm host: verdict %+v, status %q", calm.Verdict, StatusLine(calm))
	}

	// latscope itself the load: its own verdict stands.
	self := judgeAll(withHost(t0, rawStream(t0, true), 0.6, 0.9))
	if ms := stallMarkers(self); len(ms) != 1 || ms[0].Cause != event.StallProbeStarved || self.Verdict.State == ProbeHostBusy {
		t.Fatalf("latscope the load: markers %+v verdict %+v", ms, self.Verdict)
	}
}

// TestHostBusyAtStart: a run whose first host sample finds the host busy
// says so before its first request, and the summary carries the host line
// in text and JSON.
func TestHostBusyAtStart(t *testing.T) {
	t.Parallel()
	t0 := base()
	s := judgeAll(withHost(t0, rawStream(t0, false), 0.38, 0.07))
	var first *event.Marker
	for i, m := range s.Markers.Recent {
		if m.Source == "aggregate.host" {
			first = &s.Markers.Recent[i]
			break
		}
	}
	if first == nil || !strings.HasPrefix(first.Message, "the client host is busy: timings will include its delays (PSI cpu 38%") ||
		!first.Time.Before(t0) {
		t.Fatalf("marker %+v: want the busy host said at the start", first)
	}
	sum := s.Summary()
	var text bytes.Buffer
	if err := WriteTable(&text, sum); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Host: PSI cpu 38% · steal 0% · run queue 9/2 · latscope 7% of a core", "The client host was busy when the run started"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, sum); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Host *HostStats `json:"host"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Host == nil || !back.Host.BusyAtStart || back.Host.BusySamples != back.Host.Samples {
		t.Fatalf("JSON host %+v, %v", back.Host, err)
	}

	calm := judgeAll(withHost(t0, rawStream(t0, false), 0.01, 0.07))
	for _, m := range calm.Markers.Recent {
		if m.Source == "aggregate.host" {
			t.Fatalf("calm host marked busy: %+v", m)
		}
	}
	if h := calm.Summary().Host; h == nil || h.BusyAtStart || !strings.HasPrefix(h.Line(), "host: PSI cpu 1%") {
		t.Fatalf("calm host: %+v", h)
	}
	// No host collector: no host line.
	if h := judgeAll(rawStream(t0, false)).Summary().Host; h != nil {
		t.Fatalf("host %+v without host samples", h)
	}
}

// TestHostPressureReplays: a recording (JSON: wall-clock times only) of a
// live stream with host samples derives the same host-named pauses and
// verdict as the live run did.
func TestHostPressureReplays(t *testing.T) {
	t.Parallel()
	t0 := time.Now() // with a monotonic reading, as a live run's times
	live := withHost(t0, rawStream(t0, true), 0.38, 0.07)
	replayed := throughCodec(t, live)
	a, b := judgeAll(live), judgeAll(replayed)
	am, bm := stallMarkers(a), stallMarkers(b)
	if len(am) != 1 || len(bm) != 1 || am[0].Message != bm[0].Message || am[0].Cause != event.StallClientHost {
		t.Fatalf("live %+v, replayed %+v: want one host pause, the same", am, bm)
	}
	if a.Verdict.Reason != b.Verdict.Reason || a.Host.Line() != b.Host.Line() {
		t.Fatalf("live %q / %q, replayed %q / %q", a.Verdict.Reason, a.Host.Line(), b.Verdict.Reason, b.Host.Line())
	}
}
