package sweep

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/latscope/latscope/aggregate/sweepjudge"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
)

// TestRecordedPrintsWhatTheSweepPrinted: a sweep's stream, read back event
// by event as a report reads its recording, gives the table the live sweep
// printed, word for word, with its answer and why it stopped; the rules
// ride in the stream, not in the reader's settings.
func TestRecordedPrintsWhatTheSweepPrinted(t *testing.T) {
	clock := &vclock{t: t0}
	server := fifoServer{capacity: 90, prefill: 20 * time.Millisecond, decode: 100 * time.Millisecond}
	cfg := synthConfig(clock, server, Plan{Mode: OpenLoop, Start: 25, Factor: 2, Max: 400, Refine: 2})
	cfg.SLO = sloOf(t, "ttft.p99<100ms")
	cfg.Header = &event.Session{Time: t0, Load: event.Load{Mode: "sweep", Arrival: "constant", SLO: "ttft.p99<100ms"}}
	cfg.Fanout = pipeline.NewFanout()
	events := collect(cfg.Fanout)
	live, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if live.MaxLoad == nil {
		t.Fatalf("the live sweep found no max load: %+v", live)
	}
	var rec sweepjudge.Recorded
	var rules, ended int
	for _, ev := range events() {
		if m := ev.Marker; m != nil && m.Source == sweepjudge.MarkerSource {
			switch m.Values["sweep"] {
			case 1:
				rules++
			case 2:
				ended++
			}
		}
		rec.Add(ev)
	}
	if rules != 1 || ended != 1 {
		t.Fatalf("%d rules and %d ended markers in the stream, want one of each", rules, ended)
	}
	judged, ok, err := rec.Result()
	if err != nil || !ok {
		t.Fatalf("Result: ok %v, %v", ok, err)
	}
	got := ResultOf(judged)
	var want, have bytes.Buffer
	if err := WriteTable(&want, live); err != nil {
		t.Fatal(err)
	}
	if err := WriteTable(&have, got); err != nil {
		t.Fatal(err)
	}
	if have.String() != want.String() {
		t.Errorf("the recording's table:\n%s\nthe live sweep's:\n%s", have.String(), want.String())
	}
	if got.Stopped != live.Stopped || got.Interrupted {
		t.Errorf("stopped %q (interrupted %v), live %q", got.Stopped, got.Interrupted, live.Stopped)
	}
}
