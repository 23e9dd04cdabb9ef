package report

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

func TestLoadCoversEveryEvent(t *testing.T) {
	t.Parallel()
	s := defaultSynth(1)
	rec := s.load(t)
	evs := s.events()
	if got, want := rec.Events, int64(len(evs)+1); got != want {
		t.Errorf("events = %d, want %d (the header and every event)", got, want)
	}
	var sent int64
	for _, ev := range evs {
		if ev.Request != nil {
			sent++
		}
	}
	if got := rec.Summary.Requests.Sent; got != sent {
		t.Errorf("sent = %d, want %d", got, sent)
	}
	if len(rec.Warnings) != 0 {
		t.Errorf("warnings on a whole file: %q", rec.Warnings)
	}
	if !rec.Simulated() || rec.Name() != "run-1.zst" {
		t.Errorf("simulated %v, name %q", rec.Simulated(), rec.Name())
	}
}

func TestSeriesHasAPointPerStep(t *testing.T) {
	t.Parallel()
	rec := defaultSynth(3).load(t)
	s := rec.Series
	if s.Step != time.Second || s.Window != aggregate.Win10s {
		t.Fatalf("step %s window %s, want 1s and 10s for a one-minute session", s.Step, s.Window)
	}
	if n := len(s.Points); n < 60 || n > 63 {
		t.Fatalf("%d points, want about 61", n)
	}
	for i, p := range s.Points {
		if want := time.Duration(i+1)*time.Second - 250*time.Millisecond; p.At != want {
			t.Fatalf("point %d at %s, want %s (whole seconds since the session's start second)", i, p.At, want)
		}
	}
	mid := s.Points[30]
	for name, v := range map[string]float64{"ttft p50": mid.TTFTP50, "ttft p99": mid.TTFTP99, "itl p50": mid.ITLP50,
		"itl p99": mid.ITLP99, "waiting": mid.Waiting, "running": mid.Running, "in flight": mid.InFlight, "ok/s": mid.OKPerSec} {
		if math.IsNaN(v) || v <= 0 {
			t.Errorf("%s at %s = %v, want a value", name, mid.At, v)
		}
	}
	if !(mid.TTFTP99 >= mid.TTFTP50) || !(mid.ITLP50 > 7 && mid.ITLP50 < 13) {
		t.Errorf("implausible point: %+v", mid)
	}
	if ok := mid.OKPerSec; ok < 8 || ok > 11 {
		t.Errorf("ok/s %.2f over the last 10 s, want about 9.75 (10/s less one 503 in 40)", ok)
	}
}

func TestChooseStepKeepsPointsBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		session time.Duration
		step    time.Duration
		window  aggregate.Window
	}{
		{20 * time.Second, time.Second, aggregate.Win10s},
		{5 * time.Minute, time.Second, aggregate.Win10s},
		{6 * time.Minute, 2 * time.Second, aggregate.Win10s},
		{time.Hour, 15 * time.Second, aggregate.Win1m},
		{24 * time.Hour, 5 * time.Minute, aggregate.Win5m},
		{400 * time.Hour, 2 * time.Hour, aggregate.Win5m},
	} {
		step := chooseStep(tc.session)
		if step != tc.step || windowFor(step) != tc.window {
			t.Errorf("%s: step %s window %s, want %s %s", tc.session, step, windowFor(step), tc.step, tc.window)
		}
		if tc.session/step > maxPoints {
			t.Errorf("%s: %d points", tc.session, tc.session/step)
		}
	}
}

func TestReordererReleasesInTimeOrder(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 7))
	var evs []event.Event
	for i := range 2000 {
		// Recorded up to 3 s after their time, like requests waiting for spans.
		at := t0.Add(time.Duration(i)*10*time.Millisecond - time.Duration(rng.IntN(3000))*time.Millisecond)
		evs = append(evs, event.NewMarker(&event.Marker{Time: at, Kind: event.MarkerNote}))
	}
	evs = append(evs, event.NewMarker(&event.Marker{Kind: event.MarkerNote})) // no time: kept in place
	var clock orderClock
	var lateness time.Duration
	for _, ev := range evs {
		before := clock.latest
		lateness = max(lateness, before.Sub(clock.key(ev)))
	}
	var got []time.Time
	var held int
	r := &reorderer{lateness: lateness, release: func(at time.Time, _ event.Event) { got = append(got, at) }}
	for _, ev := range evs {
		r.add(ev)
		held = max(held, len(r.held))
	}
	r.flush()
	if len(got) != len(evs) {
		t.Fatalf("released %d of %d", len(got), len(evs))
	}
	if !slices.IsSortedFunc(got, time.Time.Compare) {
		t.Error("events released out of time order")
	}
	if held > 400 {
		t.Errorf("held up to %d events; the lateness (%s) should bound it to about 300", held, lateness)
	}
}
