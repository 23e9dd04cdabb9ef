package aggregate

import (
	"math"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// The users' records from the server's spans are counted apart: never in
// the requests, latencies or breakdown of latscope's own (the canary's),
// always in UserSpans, and listed in the request sample.
func TestUserSpansKeptApart(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 5, 6, 0, 0, time.UTC)
	now := t0.Add(5 * time.Second)
	a := New(Config{Now: func() time.Time { return now }})
	a.Add(event.NewSession(&event.Session{Time: t0, Load: event.Load{Mode: event.LoadCanary}}))
	for i := range 4 {
		start := t0.Add(time.Duration(i) * time.Second)
		a.Add(event.NewRequest(&event.Request{ID: "u", Intended: start, Start: start, Outcome: event.OutcomeOK,
			TTFT: 40 * time.Millisecond, E2E: 200 * time.Millisecond, Flags: []event.Flag{event.FlagServerReported},
			Server: &event.ServerTiming{Source: event.SourceOTLP, Stages: map[event.Stage]time.Duration{
				event.StageQueue: 20 * time.Millisecond, event.StagePrefill: 10 * time.Millisecond, event.StageDecode: 150 * time.Millisecond}}}))
	}
	canary := &event.Request{ID: "c", Intended: t0, Start: t0, Outcome: event.OutcomeOK, TTFT: 90 * time.Millisecond,
		E2E: 300 * time.Millisecond, Flags: []event.Flag{event.FlagCanary}}
	a.Add(event.NewRequest(canary))
	s := a.Snapshot(now)
	run := s.Windows[WinRun]
	if s.Requests.OK != 1 || run.TTFT.Count != 1 || run.TTFT.Mean != 90 {
		t.Errorf("the users' records reached the canary's figures: ok %d, ttft %+v", s.Requests.OK, run.TTFT)
	}
	u := run.Traffic.Spans
	if u == nil || u.Requests != 4 || u.TTFT.Mean != 40 || u.Queue.Count != 4 || u.Decode.P50 != 150 {
		t.Fatalf("users' spans: %+v", u)
	}
	for name, want := range map[string]float64{PhaseQueue: 0.1, PhasePrefill: 0.05, PhaseDecode: 0.75, PhaseRest: 0.1} {
		if math.Abs(u.Shares[name]-want) > 1e-9 {
			t.Errorf("share %s %.4f, want %.2f", name, u.Shares[name], want)
		}
	}
	if w := s.Windows[Win10s].Traffic.Spans; w == nil || w.Requests != 4 {
		t.Errorf("10 s window: %+v", w)
	}
	if len(s.Sample.Latest) != 5 {
		t.Errorf("the sample lists %d requests, want the 4 users' and the canary's", len(s.Sample.Latest))
	}
	sum := s.Summary()
	if sum.Traffic == nil || sum.Traffic.Spans == nil || sum.Traffic.Spans.Requests != 4 {
		t.Errorf("summary: %+v", sum.Traffic)
	}
}
