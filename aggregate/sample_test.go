package aggregate

import (
	"fmt"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

func sampleReq(i int, end time.Time, ttft time.Duration) *event.Request {
	e2e := ttft + 100*time.Millisecond
	return &event.Request{ID: fmt.Sprintf("r%03d", i), Intended: end.Add(-e2e), Start: end.Add(-e2e), TTFT: ttft, E2E: e2e, Outcome: event.OutcomeOK}
}

func TestSamplerKeepsLatestAndSlowestPerWindow(t *testing.T) {
	t0 := base()
	s := newRequestSampler(3)
	// 300 requests over 5 minutes, one a second; the slowest is early.
	for i := range 300 {
		ttft := time.Duration(10+i%7) * time.Millisecond
		if i == 5 {
			ttft = time.Second
		}
		s.add(sampleReq(i, t0.Add(time.Duration(i)*time.Second), ttft))
	}
	s.add(&event.Request{ID: "warm", Warmup: true, TTFT: time.Hour})
	got := s.sample(t0.Add(299 * time.Second))
	if len(got.Latest) != 3 || got.Latest[0].ID != "r299" || got.Latest[2].ID != "r297" {
		t.Fatalf("latest %v, want r299 r298 r297", ids(got.Latest))
	}
	if run := got.Slowest[WinRun]; len(run) != 3 || run[0].ID != "r005" {
		t.Errorf("run's slowest %v, want r005 first", ids(run))
	}
	for _, w := range []Window{Win10s, Win1m, Win5m} {
		list := got.Slowest[w]
		if len(list) != 3 {
			t.Fatalf("%v: %d slowest, want 3", w, len(list))
		}
		for _, r := range list {
			if r.ID == "r005" && w != Win5m {
				t.Errorf("%v lists r005, which ended outside it", w)
			}
			if r.TTFT < list[len(list)-1].TTFT {
				t.Errorf("%v not slowest first: %v", w, ids(list))
			}
		}
	}
}

func ids(rs []*event.Request) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

// The snapshot publishes the sample: every request the aggregator took
// (losslessly), with the decode numbers of each listed one.
func TestSnapshotPublishesTheRequestSample(t *testing.T) {
	t0 := base()
	a := New(Config{SampleKeep: 5})
	for i := range 12 {
		r := okReq(t0.Add(time.Duration(i)*time.Second), 20*time.Millisecond, 10*time.Millisecond, 6)
		r.ID = fmt.Sprintf("r%02d", i)
		a.Add(event.NewRequest(r))
	}
	s := a.Snapshot(a.Latest())
	if len(s.Sample.Latest) != 5 || s.Sample.Latest[0].ID != "r11" {
		t.Fatalf("latest %v, want the 5 newest, r11 first", ids(s.Sample.Latest))
	}
	for _, r := range s.Sample.Latest {
		if d, ok := s.Sample.Decode[r]; !ok || d.Chunks != 6 || d.P50 != 10*time.Millisecond {
			t.Fatalf("%s: decode %+v (listed %v), want 6 chunks, ITL p50 10 ms", r.ID, d, ok)
		}
	}
	if off := New(Config{SampleKeep: -1}); off.Snapshot(t0).Sample.Latest != nil {
		t.Error("SampleKeep < 0 still sampled")
	}
}

// The slowest lists never leave out a request that the latest list shows
// and that is slower than rows they show, even when the snapshot they are
// drawn with is behind the newest requests.
func TestSlowestIncludesRequestsNewerThanTheSnapshot(t *testing.T) {
	t0 := base()
	s := newRequestSampler(3)
	at := func(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }
	req := func(id string, end float64, ttft time.Duration) *event.Request {
		return &event.Request{ID: id, Start: at(end).Add(-2 * ttft), TTFT: ttft, E2E: 2 * ttft, Outcome: event.OutcomeOK}
	}
	for i, ttft := range []time.Duration{100, 120, 140, 160} {
		s.add(req(fmt.Sprintf("old-%d", i), 29+float64(i)/10, ttft*time.Millisecond))
	}
	// Two slow requests end after the snapshot below, in the next 1 s and
	// 10 s slots.
	s.add(req("new-slow-1", 30.2, 900*time.Millisecond))
	s.add(req("new-slow-2", 30.4, 800*time.Millisecond))
	sample := s.sample(at(29.9))
	latest := map[string]bool{}
	for _, r := range sample.Latest {
		latest[r.ID] = true
	}
	for w := range NumWindows {
		var ids []string
		for _, r := range sample.Slowest[w] {
			ids = append(ids, r.ID)
		}
		if len(ids) < 2 || ids[0] != "new-slow-1" || ids[1] != "new-slow-2" {
			t.Errorf("%s: slowest %v, want new-slow-1 and new-slow-2 first (the latest list shows them: %v)", w, ids, latest)
		}
	}
}

// A snapshot's sample is a value: the aggregator taking more requests
// never changes what an earlier snapshot lists (a screen reads it on
// another goroutine).
func TestSampleOfASnapshotDoesNotChange(t *testing.T) {
	t0 := base()
	a := New(Config{SampleKeep: 3})
	add := func(i int) {
		r := okReq(t0.Add(time.Duration(i)*100*time.Millisecond), time.Duration(10+i%5)*time.Millisecond, time.Millisecond, 3)
		r.ID = fmt.Sprintf("r%03d", i)
		a.Add(event.NewRequest(r))
	}
	for i := range 10 {
		add(i)
	}
	first := a.Snapshot(a.Latest()).Sample
	latest, slow := ids(first.Latest), ids(first.Slowest[WinRun])
	decoded := len(first.Decode)
	for i := 10; i < 200; i++ {
		add(i)
		a.Snapshot(a.Latest())
	}
	if got := ids(first.Latest); fmt.Sprint(got) != fmt.Sprint(latest) {
		t.Errorf("latest list changed from %v to %v", latest, got)
	}
	if got := ids(first.Slowest[WinRun]); fmt.Sprint(got) != fmt.Sprint(slow) {
		t.Errorf("slowest list changed from %v to %v", slow, got)
	}
	if len(first.Decode) != decoded {
		t.Errorf("decode numbers changed from %d to %d", decoded, len(first.Decode))
	}
}
