package tui

// The probe's verdict through the demo's pipeline: the simulator, the real
// probe and the aggregator, then every surface that speaks of the probe
// (the dashboard's badge and warning, the status line, the markers, the
// insights, the summary as text and JSON) judged against the one verdict.

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/sim"
	"github.com/latscope/latscope/sim/simtest"
)

// The probe's evidence demoRun injects halfway through the run.
type injected int

const (
	calm injected = iota
	// starvedPause is one probe-starved stall marker of 1 ms (the stall
	// detector's, as a host's hiccup makes it): a pause of the probe's own.
	starvedPause
	// limitMarker is a probe_limit marker: the probe's own word that it is
	// the limit.
	limitMarker
)

// demoRun sends a closed loop of 4 streams, 32 requests, through the
// real probe to the tiny simulator and aggregates what comes out, with
// the evidence inj injected into the stream halfway.
func demoRun(t *testing.T, inj injected) aggregate.Snapshot {
	t.Helper()
	url := simtest.ServeTiny(t, sim.Config{Seed: 5})
	client, err := probe.NewClient(probe.ClientConfig{BaseURL: url, Dialect: probe.DialectOpenAIChat, Model: sim.DefaultModel, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prompts, err := probe.NewPromptSource(ctx, probe.PromptConfig{
		PromptTokens: probe.Length{Mean: 32}, OutputTokens: probe.Length{Mean: 16}, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	runner, err := probe.NewRunner(client, probe.LoadConfig{Concurrency: 4, Requests: 32}, prompts)
	if err != nil {
		t.Fatal(err)
	}
	agg := aggregate.New(aggregate.Config{})
	var mu sync.Mutex // emit's goroutine is the Runner's; the test reads after Run
	agg.Add(event.NewSession(&event.Session{Time: time.Now(), Target: url, Simulated: true,
		Load: event.Load{Mode: "closed", Concurrency: 4, Requests: 32}}))
	done := 0
	err = runner.Run(ctx, func(ev event.Event) {
		mu.Lock()
		defer mu.Unlock()
		agg.Add(ev)
		if ev.Request == nil {
			return
		}
		if done++; done != 16 {
			return
		}
		end := ev.Request.EndedAt()
		switch inj {
		case starvedPause:
			agg.Add(event.NewMarker(&event.Marker{Time: end.Add(-3 * time.Millisecond), Kind: event.MarkerStall, Source: "stall-detector",
				Cause: event.StallProbeStarved, Duration: time.Millisecond, RequestIDs: []string{"a", "b", "c"},
				Message: "probe starved: 3 streams paused together for 1.0 ms (longest gap 1.2 ms, normal gap 0.4 ms); latscope's own goroutines ran late for 1.0 ms of it (100%): the probe paused, not the server",
				Values:  map[string]float64{"streams": 3, "pauses": 1, "gap_ms": 1, "longest_gap_ms": 1.2, "itl_ms": 0.4, "covered_share": 1}}))
		case limitMarker:
			agg.Add(event.NewMarker(&event.Marker{Time: end, Kind: event.MarkerProbeLimit, Source: "probe",
				Message: "probe is the bottleneck: it uses 97% of the host's CPU (all 2 cores together)"}))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if st := runner.Stats(); st.OK < 30 {
		t.Fatalf("only %d of 32 requests ok: %+v", st.OK, st)
	}
	return agg.Snapshot(agg.Latest())
}

// checkProbeSurfaces checks that every surface says the snapshot's verdict
// and none says against it.
func checkProbeSurfaces(t *testing.T, s aggregate.Snapshot) {
	t.Helper()
	v := s.Verdict
	held := v.Held()

	m := newModel(StaticFeed(Frame{Snapshot: s}), Options{}, plainRenderer())
	m.Update(sizeMsg(160, 48))
	m.Update(tickMsg{})
	view := m.View()
	badge := map[aggregate.ProbeState]string{aggregate.ProbeKeptPace: "probe ✓", aggregate.ProbePaused: "probe !", aggregate.ProbeHeld: "probe ✗", aggregate.ProbeUnknown: "probe –"}
	for state, b := range badge {
		if strings.Contains(view, b) != (state == v.State) {
			t.Errorf("dashboard badge %q shown %t, verdict %s:\n%s", b, !(state == v.State), v.State, view)
		}
	}
	if strings.Contains(view, "LATSCOPE IS THE LIMIT") != held {
		t.Errorf("dashboard warning against the verdict %s:\n%s", v.State, view)
	}

	line := aggregate.StatusLine(s)
	if strings.Contains(line, "LATSCOPE IS THE LIMIT") != held || strings.Contains(line, "latscope paused") != (v.State == aggregate.ProbePaused) {
		t.Errorf("status line %q against the verdict %s", line, v.State)
	}

	// The markers hold the evidence: a pause of the probe's own, or the
	// probe flagging itself, is never beside a probe that kept pace.
	for _, mk := range s.Markers.Recent {
		if (mk.Cause == event.StallProbeStarved || mk.Kind == event.MarkerProbeLimit) && v.State == aggregate.ProbeKeptPace {
			t.Errorf("marker %q beside the verdict %s", mk.Message, v.State)
		}
	}
	if s.Markers.StallCauses[event.StallProbeStarved] > 0 != (v.StarvedStalls > 0) {
		t.Errorf("marker counts %v against the verdict's %d starved stalls", s.Markers.StallCauses, v.StarvedStalls)
	}

	for _, ins := range s.Insights {
		switch {
		case strings.HasPrefix(ins.Message, "the probe is the limit") && !held,
			strings.HasPrefix(ins.Message, "the server, not the probe") && v.State != aggregate.ProbeKeptPace,
			strings.HasPrefix(ins.Message, "the probe paused") && v.State != aggregate.ProbePaused,
			strings.Contains(ins.Message, "latscope's own") && v.StarvedStalls == 0:
			t.Errorf("insight %q against the verdict %s", ins.Message, v.State)
		}
	}
	if _, ok := insightPrefix(s.Insights, "the probe is the limit"); ok != held {
		t.Errorf("held %t but the limit insight shown %t: %v", held, ok, s.Insights)
	}

	sum := s.Summary()
	var table strings.Builder
	if err := aggregate.WriteTable(&table, sum); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "Probe: "+v.VerdictText()) {
		t.Errorf("summary lacks the verdict %q", v.VerdictText())
	}
	var js strings.Builder
	if err := aggregate.WriteJSON(&js, sum); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Verdict aggregate.ProbeVerdict `json:"probe_verdict"`
	}
	if err := json.Unmarshal([]byte(js.String()), &back); err != nil {
		t.Fatal(err)
	}
	if back.Verdict.State != v.State || back.Verdict.Reason != v.Reason {
		t.Errorf("JSON verdict %+v, want %s %q", back.Verdict, v.State, v.Reason)
	}
}

func insightPrefix(ins []event.Marker, prefix string) (event.Marker, bool) {
	for _, m := range ins {
		if strings.HasPrefix(m.Message, prefix) {
			return m, true
		}
	}
	return event.Marker{}, false
}

// A probe held once in the run is held on every surface, whatever else
// the run shows; one that paused says so everywhere and nowhere names the
// server the limit; the calm run's surfaces agree on whatever the host let
// it be (that it kept pace is the acceptance tier's to judge).
func TestProbeVerdictThroughTheDemoPipeline(t *testing.T) {
	t.Run("held", func(t *testing.T) {
		s := demoRun(t, limitMarker)
		if !s.Verdict.Held() || s.Verdict.LimitMarkers < 1 {
			t.Fatalf("verdict %+v: want held by the injected probe_limit marker", s.Verdict)
		}
		checkProbeSurfaces(t, s)
	})
	t.Run("paused", func(t *testing.T) {
		s := demoRun(t, starvedPause)
		// 1 ms is under 1% of a run longer than 100 ms; a shorter run makes
		// the same pause a material share, and the probe held.
		if v := s.Verdict; v.StarvedStalls < 1 || v.State != aggregate.ProbePaused && !v.Held() {
			t.Fatalf("verdict %+v: want paused by the injected starved pause", s.Verdict)
		}
		checkProbeSurfaces(t, s)
	})
	t.Run("calm", func(t *testing.T) {
		s := demoRun(t, calm)
		if s.Verdict.State == aggregate.ProbeUnknown {
			t.Fatalf("verdict %+v: the probe's samples are evidence", s.Verdict)
		}
		if s.Verdict.LagMeasured {
			t.Errorf("a closed loop's lag judged: %+v", s.Verdict)
		}
		t.Logf("verdict: %s", s.Verdict.VerdictText())
		checkProbeSurfaces(t, s)
	})
}
