package aggregate

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// markersOf returns the derived markers of kind k in s, oldest first.
func markersOf(s Summary, k event.MarkerKind) []event.Marker {
	var out []event.Marker
	for _, m := range s.Markers.Recent {
		if m.Kind == k && m.Source == DerivedSource {
			out = append(out, m)
		}
	}
	return out
}

// steady adds n requests a second for secs seconds from base() on, each
// with the TTFT ttft(sec) returns.
func steady(a *Aggregator, secs, n int, ttft func(sec int) time.Duration) {
	for sec := range secs {
		for i := range n {
			at := base().Add(time.Duration(sec)*time.Second + time.Duration(i)*time.Second/time.Duration(n))
			addAll(a, okReq(at, ttft(sec), time.Millisecond, 2))
		}
	}
}

func TestSLOBreachMarkedOnceWhenItLastsAWholeWindow(t *testing.T) {
	t.Parallel()
	slo, err := ParseSLO("ttft.p99<100ms")
	if err != nil {
		t.Fatal(err)
	}
	a := New(Config{SLO: slo})
	// 20 s within the objective, 30 s broken, 20 s within, 5 s broken.
	steady(a, 75, 5, func(sec int) time.Duration {
		if sec >= 20 && sec < 50 || sec >= 70 {
			return 300 * time.Millisecond
		}
		return 50 * time.Millisecond
	})
	got := markersOf(a.Summary(), MarkerSLOBreach)
	if len(got) != 1 {
		t.Fatalf("%d breach markers, want 1 for the one breach that lasted a whole window: %+v", len(got), got)
	}
	m := got[0]
	if !strings.Contains(m.Message, "SLO ttft.p99<100ms broken for a whole 10 s window (now 300") {
		t.Errorf("message %q", m.Message)
	}
	// Broken from the first window holding a slow request (the edge at 21 s)
	// for a whole window: marked at the edge 10 s later.
	if want := base().Add(31 * time.Second); !m.Time.Equal(want) {
		t.Errorf("marked at %v, want %v", m.Time.Sub(base()), want.Sub(base()))
	}
}

func TestBreachesNeedObjectivesFromConfigOrSession(t *testing.T) {
	t.Parallel()
	slow := func(int) time.Duration { return time.Second }
	a := New(Config{})
	steady(a, 30, 2, slow)
	if got := markersOf(a.Summary(), MarkerSLOBreach); len(got) != 0 {
		t.Errorf("breach markers without objectives: %+v", got)
	}
	// A replayed session brings its own objectives.
	b := New(Config{})
	b.Add(event.NewSession(&event.Session{Time: base(), Load: event.Load{SLO: "e2e.p50<10ms"}}))
	steady(b, 30, 2, slow)
	if got := markersOf(b.Summary(), MarkerSLOBreach); len(got) != 1 {
		t.Errorf("%d breach markers from the session's objectives, want 1", len(got))
	}
	// One latscope would refuse is not guessed at: a note says so.
	c := New(Config{})
	c.Add(event.NewSession(&event.Session{Time: base(), Load: event.Load{SLO: "ttft.p99=100ms"}}))
	steady(c, 30, 2, slow)
	notes := markersOf(c.Summary(), event.MarkerNote)
	if len(notes) != 1 || !strings.Contains(notes[0].Message, `invalid SLO "ttft.p99=100ms"`) {
		t.Errorf("notes = %+v, want one saying the session's objectives are invalid", notes)
	}
}

func TestErrorBurstAndNagleMarkersPerPeriod(t *testing.T) {
	t.Parallel()
	ok := func(sec float64) *event.Request {
		return okReq(base().Add(time.Duration(sec*float64(time.Second))), 10*time.Millisecond, time.Millisecond, 2)
	}
	// One request a second. Period 10–20 s: three errors; period 20–30 s:
	// one error in ten requests (10%); period 30–40 s: two Nagle suspects.
	a := New(Config{})
	for sec := range 40 {
		var r *event.Request
		switch sec {
		case 12, 13:
			r = errReq(base().Add(time.Duration(sec)*time.Second), event.OutcomeHTTPStatus, 429)
		case 14:
			r = errReq(base().Add(time.Duration(sec)*time.Second), event.OutcomeStreamReset, 0)
		case 25:
			r = errReq(base().Add(time.Duration(sec)*time.Second), event.OutcomeTimeout, 0)
		default:
			r = ok(float64(sec))
			if sec == 33 || sec == 36 {
				r.Flags = []event.Flag{event.FlagNagleSuspect}
			}
		}
		addAll(a, r)
	}
	s := a.Summary()
	bursts := markersOf(s, MarkerErrorBurst)
	if len(bursts) != 2 {
		t.Fatalf("%d error bursts, want 2: %+v", len(bursts), bursts)
	}
	if m := bursts[0]; !m.Time.Equal(base().Add(20*time.Second)) || !strings.Contains(m.Message, "429 ×2, stream_reset ×1 in 10s (30.0% of 10 finished requests)") {
		t.Errorf("first burst %v %q", m.Time.Sub(base()), m.Message)
	}
	if m := bursts[1]; !strings.Contains(m.Message, "timeout ×1 in 10s (10.0% of 10 finished requests)") {
		t.Errorf("second burst %q", m.Message)
	}
	nagle := markersOf(s, event.MarkerGap)
	// The last period is still open at the end: the summary judges it.
	if len(nagle) != 1 || !strings.Contains(nagle[0].Message, "Nagle suspect: 2 of 10 finished requests") {
		t.Errorf("Nagle markers %+v, want one for 2 of 10", nagle)
	}
	// Judging the open period again adds nothing.
	if again := markersOf(a.Summary(), event.MarkerGap); len(again) != 1 {
		t.Errorf("a second summary has %d Nagle markers, want 1", len(again))
	}
}

// The derived markers come from event time, not from when snapshots are
// taken: a replay snapshotted at any cadence derives the same ones.
func TestDerivedMarkersDoNotDependOnSnapshotCadence(t *testing.T) {
	t.Parallel()
	slo, _ := ParseSLO("ttft.p99<100ms,errors.rate<5%")
	var evs []event.Event
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 2000 {
		at := base().Add(time.Duration(i) * 37 * time.Millisecond)
		var r *event.Request
		switch {
		case rng.IntN(20) == 0:
			r = errReq(at, event.OutcomeHTTPStatus, 500+rng.IntN(4))
		default:
			ttft := time.Duration(20+rng.IntN(60)) * time.Millisecond
			if i > 600 && i < 1200 {
				ttft *= 4
			}
			r = okReq(at, ttft, time.Millisecond, 3)
			if rng.IntN(50) == 0 {
				r.Flags = []event.Flag{event.FlagNagleSuspect}
			}
		}
		evs = append(evs, event.NewRequest(r))
	}
	run := func(every int) []event.Marker {
		a := New(Config{SLO: slo, RecentMarkers: 1000})
		for i, ev := range evs {
			a.Add(ev)
			if every > 0 && i%every == 0 {
				a.Snapshot(a.Latest())
			}
		}
		return a.Summary().Markers.Recent
	}
	want := run(0)
	if len(want) == 0 {
		t.Fatal("no markers derived: the stream was meant to have breaches and bursts")
	}
	for _, every := range []int{1, 7, 250} {
		if got := run(every); !slices.EqualFunc(got, want, func(a, b event.Marker) bool {
			return a.Time.Equal(b.Time) && a.Kind == b.Kind && a.Message == b.Message
		}) {
			t.Errorf("snapshots every %d events: %d markers, want the %d of no snapshots", every, len(got), len(want))
		}
	}
}

// BenchmarkAddRequestWithObjectives is BenchmarkAddRequest/full with four
// objectives: once a second of event time (every 20 records) they are
// judged on the 10 s window, which is what the breach markers cost.
func BenchmarkAddRequestWithObjectives(b *testing.B) {
	slo, err := ParseSLO("ttft.p99<150ms,itl.p99<30ms,e2e.p50<3s,errors.rate<1%")
	if err != nil {
		b.Fatal(err)
	}
	a := New(Config{SLO: slo})
	rng := rand.New(rand.NewPCG(1, 2))
	const pool = 256
	reqs := make([]*event.Request, pool)
	for i := range reqs {
		reqs[i] = realisticRequest(rng, base())
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := reqs[i%pool]
		r.Intended = base().Add(time.Duration(i) * 50 * time.Millisecond)
		r.Start = r.Intended
		a.Add(event.NewRequest(r))
	}
}
