package aggregate

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// A server's own stages keep their names ("server: loop_wait") in the
// bands and the breakdown's statistics alike; past namedExtra of them,
// the rest is one value per request, "other", with the same amount in
// the band as in the statistics, and a count of the requests it holds.
func TestServerStagesAndOtherAreOneDerivation(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	const n = 10
	own := func(name string) event.Stage { return event.Stage(event.ServerTimingPrefix + name) }
	for i := range n {
		r := okReq(base().Add(time.Duration(i)*time.Second), 100*time.Millisecond, 10*time.Millisecond, 3)
		r.Breakdown = []event.StageTiming{{Stage: event.StagePrefill, Duration: 40 * time.Millisecond, Provenance: event.ServerReported}}
		// Six stages of the server's own names: four keep them, and two,
		// 6 ms and 7 ms, are "other": 13 ms a request.
		for k := range 6 {
			r.Breakdown = append(r.Breakdown, event.StageTiming{Stage: own(fmt.Sprint("s", k)), Duration: time.Duration(k+2) * time.Millisecond, Provenance: event.ServerReported})
		}
		addAll(a, r)
	}
	s := a.Final()
	band := s.Windows[WinRun].Bands[BandMean]
	for k := range 4 {
		name := own(fmt.Sprint("s", k))
		bs, ok := s.Breakdown.Stages[name]
		if !ok || bs.Count != n || math.Abs(band.Stages[name]-float64(k+2)) > 1e-9 {
			t.Errorf("%s: statistics %+v (present %v), band %v ms, want %d requests and %d ms in both", name, bs.Stats, ok, band.Stages[name], n, k+2)
		}
	}
	other, ok := s.Breakdown.Stages[event.StageOther]
	if !ok || other.Count != n || math.Abs(other.Mean-13) > 0.01 || math.Abs(band.Stages[event.StageOther]-13) > 1e-9 {
		t.Fatalf("other: statistics %+v (present %v), band %v ms; want %d requests of 13 ms in both", other.Stats, ok, band.Stages[event.StageOther], n)
	}
	if want := band.Stages[event.StageOther] / band.TTFT; math.Abs(other.Share-want) > 0.01 {
		t.Errorf("other's share %.3f, its band's part of the TTFT %.3f", other.Share, want)
	}
	for _, st := range []event.Stage{own("s4"), own("s5")} {
		if _, ok := s.Breakdown.Stages[st]; ok {
			t.Errorf("%s kept apart past the named ones", st)
		}
		if _, ok := band.Stages[st]; ok {
			t.Errorf("%s in the band past the named ones", st)
		}
	}
}

// With no more than namedExtra stages of its own, no "other" at all.
func TestNoOtherWhileEveryStageHasItsName(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	r := okReq(base(), 100*time.Millisecond, 10*time.Millisecond, 3)
	r.Breakdown = []event.StageTiming{
		{Stage: event.StagePrefill, Duration: 40 * time.Millisecond, Provenance: event.ServerReported},
		{Stage: event.ServerTimingPrefix + "loop_wait", Duration: 3 * time.Millisecond, Provenance: event.ServerReported},
	}
	addAll(a, r)
	s := a.Final()
	if _, ok := s.Breakdown.Stages[event.StageOther]; ok {
		t.Errorf("an other in the statistics: %v", s.Breakdown.Stages)
	}
	if _, ok := s.Windows[WinRun].Bands[BandMean].Stages[event.StageOther]; ok {
		t.Errorf("an other in the band: %v", s.Windows[WinRun].Bands[BandMean].Stages)
	}
}
