package probe

import (
	"fmt"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

var stallT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// stallStreamRec makes a record whose stream starts at start (offset from
// stallT0), sends n chunks every itl, and pauses for pause once it reaches
// pauseAt (also an offset from stallT0; no pause when pause is 0).
func stallStreamRec(id string, start time.Duration, n int, itl, pauseAt, pause time.Duration) *event.Request {
	r := &event.Request{ID: id, Start: stallT0.Add(start), Outcome: event.OutcomeOK}
	at := time.Duration(0)
	paused := false
	for range n {
		r.Chunks = append(r.Chunks, event.Chunk{At: at, Tokens: 1})
		at += itl
		if !paused && pause > 0 && start+at >= pauseAt {
			at += pause
			paused = true
		}
	}
	return r
}

func TestStallDetector(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tests := []struct {
		name        string
		recs        []*event.Request
		wantMarkers int
		wantStreams int
	}{
		{
			name: "three streams pause together",
			recs: []*event.Request{
				stallStreamRec("a", 0, 40, 10*ms, 200*ms, 60*ms),
				stallStreamRec("b", 3*ms, 40, 10*ms, 200*ms, 60*ms),
				stallStreamRec("c", 6*ms, 40, 10*ms, 200*ms, 60*ms),
			},
			wantMarkers: 1, wantStreams: 3,
		},
		{
			name: "five streams, one steady",
			recs: []*event.Request{
				stallStreamRec("a", 0, 40, 10*ms, 200*ms, 60*ms),
				stallStreamRec("b", 1*ms, 40, 10*ms, 200*ms, 60*ms),
				stallStreamRec("c", 2*ms, 40, 10*ms, 200*ms, 60*ms),
				stallStreamRec("d", 3*ms, 40, 10*ms, 200*ms, 60*ms),
				stallStreamRec("e", 4*ms, 40, 10*ms, 200*ms, 60*ms),
				stallStreamRec("steady", 5*ms, 40, 10*ms, 0, 0),
			},
			wantMarkers: 1, wantStreams: 5,
		},
		{
			name: "two streams are not enough",
			recs: []*event.Request{
				stallStreamRec("a", 0, 40, 10*ms, 200*ms, 60*ms),
				stallStreamRec("b", 3*ms, 40, 10*ms, 200*ms, 60*ms),
			},
		},
		{
			name: "gaps under 20 ms",
			recs: []*event.Request{
				stallStreamRec("a", 0, 100, 2*ms, 100*ms, 15*ms),
				stallStreamRec("b", 0, 100, 2*ms, 100*ms, 15*ms),
				stallStreamRec("c", 0, 100, 2*ms, 100*ms, 15*ms),
			},
		},
		{
			name: "pauses not overlapping",
			recs: []*event.Request{
				stallStreamRec("a", 0, 60, 10*ms, 100*ms, 50*ms),
				stallStreamRec("b", 0, 60, 10*ms, 250*ms, 50*ms),
				stallStreamRec("c", 0, 60, 10*ms, 400*ms, 50*ms),
			},
		},
		{
			name: "gap usual for a slow stream",
			recs: []*event.Request{
				stallStreamRec("a", 0, 40, 30*ms, 200*ms, 60*ms),
				stallStreamRec("b", 0, 40, 30*ms, 200*ms, 60*ms),
				stallStreamRec("c", 0, 40, 30*ms, 200*ms, 60*ms),
			},
		},
		{
			name: "two separate stalls",
			recs: []*event.Request{
				stallStreamRec("a", 0, 80, 10*ms, 200*ms, 60*ms),
				stallStreamRec("b", 0, 80, 10*ms, 200*ms, 60*ms),
				stallStreamRec("c", 0, 80, 10*ms, 200*ms, 60*ms),
				stallStreamRec("d", 0, 80, 10*ms, 600*ms, 60*ms),
				stallStreamRec("e", 0, 80, 10*ms, 600*ms, 60*ms),
				stallStreamRec("f", 0, 80, 10*ms, 600*ms, 60*ms),
			},
			wantMarkers: 2, wantStreams: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := NewStallDetector(StallConfig{})
			var got []event.Marker
			for _, r := range tt.recs {
				got = append(got, d.Add(r)...)
			}
			got = append(got, d.Flush()...)
			if len(got) != tt.wantMarkers {
				t.Fatalf("got %d markers, want %d: %+v", len(got), tt.wantMarkers, got)
			}
			for _, m := range got {
				if m.Kind != event.MarkerStall || int(m.Values["streams"]) != tt.wantStreams || len(m.RequestIDs) != tt.wantStreams {
					t.Fatalf("marker %+v, want a stall of %d streams", m, tt.wantStreams)
				}
				if m.Values["gap_ms"] < 20 || m.Duration < 20*ms || m.Message == "" {
					t.Fatalf("marker %+v: pause too short or no message", m)
				}
			}
		})
	}
}

func TestStallFoundOnceAcrossLateRecords(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	d := NewStallDetector(StallConfig{Hold: time.Second})
	// Four streams pause together at 200 ms but finish at very different
	// times (short, long and very long generations).
	a := stallStreamRec("a", 0, 30, 10*ms, 200*ms, 50*ms)
	b := stallStreamRec("b", 0, 100, 10*ms, 200*ms, 50*ms)
	c := stallStreamRec("c", 0, 300, 10*ms, 200*ms, 50*ms)
	late := stallStreamRec("late", 0, 900, 10*ms, 200*ms, 50*ms)
	var got []event.Marker
	for _, r := range []*event.Request{a, b} {
		got = append(got, d.Add(r)...)
	}
	if len(got) != 0 {
		t.Fatalf("stall reported with two streams: %+v", got)
	}
	// The third stream completes the stall; it is held, then emitted once
	// time has moved on.
	got = append(got, d.Add(c)...)
	got = append(got, d.Advance(stallT0.Add(5*time.Second))...)
	if len(got) != 1 || got[0].Values["streams"] != 3 {
		t.Fatalf("got %+v, want one stall of 3 streams", got)
	}
	// A fourth stream reporting the same pause much later joins silently.
	got = append(got, d.Add(late)...)
	got = append(got, d.Flush()...)
	if len(got) != 1 {
		t.Fatalf("same stall reported %d times: %+v", len(got), got)
	}

	// Without the hold passing, all four are in the one marker.
	d2 := NewStallDetector(StallConfig{Hold: time.Minute})
	var got2 []event.Marker
	for _, r := range []*event.Request{late, a, c, b} {
		got2 = append(got2, d2.Add(r)...)
	}
	got2 = append(got2, d2.Flush()...)
	if len(got2) != 1 || got2[0].Values["streams"] != 4 {
		t.Fatalf("got %+v, want one stall of 4 streams", got2)
	}
	if want := stallT0.Add(200 * ms); got2[0].Time.Before(want.Add(-10*ms)) || got2[0].Time.After(want.Add(10*ms)) {
		t.Fatalf("stall at %s, want about %s", got2[0].Time, want)
	}
}

func TestStallDetectorMemoryBounded(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	d := NewStallDetector(StallConfig{MaxGaps: 100, Window: time.Hour})
	for i := range 2000 {
		// Each stream pauses alone at its own time: gaps pile up, no stall.
		start := time.Duration(i) * time.Second
		d.Add(stallStreamRec(fmt.Sprint(i), start, 20, 10*ms, start+50*ms, 80*ms))
	}
	if len(d.gaps) > 100 {
		t.Fatalf("detector keeps %d gaps, want at most 100", len(d.gaps))
	}
	d2 := NewStallDetector(StallConfig{Window: time.Minute})
	for i := range 2000 {
		start := time.Duration(i) * time.Second
		for j := range 3 {
			d2.Add(stallStreamRec(fmt.Sprint(i, "-", j), start, 20, 10*ms, start+50*ms, 80*ms))
		}
	}
	if len(d2.stalls) > 70 || len(d2.gaps) > 10 {
		t.Fatalf("detector keeps %d stalls and %d gaps after the window", len(d2.stalls), len(d2.gaps))
	}
}

func TestStallDetectorIgnoresShortAndNil(t *testing.T) {
	t.Parallel()
	d := NewStallDetector(StallConfig{})
	if m := d.Add(nil); m != nil {
		t.Fatalf("nil record gave %v", m)
	}
	short := &event.Request{ID: "s", Start: stallT0, Chunks: []event.Chunk{{At: 0}, {At: time.Second}}}
	for range 5 {
		d.Add(short)
	}
	if len(d.gaps) != 0 {
		t.Fatalf("a two-chunk stream produced gaps")
	}
}
