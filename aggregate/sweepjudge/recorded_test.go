package sweepjudge

import (
	"testing"

	"github.com/latscope/latscope/event"
)

// TestRecordedWithoutRules: events without a rules marker (no sweep, or an
// older recording) give no result; a cut recording says it ended first.
func TestRecordedWithoutRules(t *testing.T) {
	var rec Recorded
	rec.Add(event.NewSession(&event.Session{Time: t0, Load: event.Load{Mode: "sweep"}}))
	rec.Add(StartMarker(t0, StepSpec{Index: 1, Load: Load{Mode: OpenLoop, Value: 4}}))
	if _, ok, err := rec.Result(); ok || err != nil {
		t.Errorf("a result from a stream without rules: ok %v, %v", ok, err)
	}

	set, err := Rules{}.Fill()
	if err != nil {
		t.Fatal(err)
	}
	var cut Recorded
	cut.Add(event.NewSession(&event.Session{Time: t0, Load: event.Load{Mode: "sweep"}}))
	cut.Add(RulesMarker(t0, set))
	cut.Add(StartMarker(t0, StepSpec{Index: 1, Load: Load{Mode: OpenLoop, Value: 4}}))
	res, ok, err := cut.Result()
	if !ok || err != nil {
		t.Fatalf("ok %v, %v", ok, err)
	}
	if len(res.Steps) != 1 || !res.Steps[0].Interrupted || !res.Interrupted || res.Stopped != "the recording ended before the sweep did" {
		t.Errorf("a recording cut inside a step: %+v", res)
	}

	var bad Recorded
	bad.Add(event.NewSession(&event.Session{Time: t0, Load: event.Load{Mode: "sweep", SLO: "ttft.p99<<1"}}))
	bad.Add(RulesMarker(t0, set))
	if _, ok, err := bad.Result(); ok || err == nil {
		t.Errorf("an unreadable SLO: ok %v, err %v", ok, err)
	}
}
