package stall

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// gapStream is a stream of one token every 10 ms, from stallT0, that
// pauses once: no read from gapFrom to gapFrom+gap (offsets from stallT0).
func gapStream(id string, gapFrom, gap time.Duration) *event.Request {
	const itl = 10 * time.Millisecond
	phase := gapFrom % itl
	r := &event.Request{ID: id, Start: stallT0, Intended: stallT0, Outcome: event.OutcomeOK,
		Stages: clientStages(time.Millisecond, 2*time.Millisecond, phase+itl)}
	for at := phase + itl; at <= gapFrom; at += itl {
		r.Chunks = append(r.Chunks, event.Chunk{At: at, Tokens: 1})
	}
	for at := gapFrom + gap; at < gapFrom+gap+300*time.Millisecond; at += itl {
		r.Chunks = append(r.Chunks, event.Chunk{At: at, Tokens: 1})
	}
	return r
}

// Three streams' 30 ms gaps (3× their normal gap) that overlap for less
// than the 1 ms floor make no marker: that overlap is no pause they shared.
// The same gaps overlapping for 4 ms do.
func TestStallFloorOnTheSharedPause(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	for _, tc := range []struct {
		spacing time.Duration // between one stream's gap and the next's
		want    int
	}{{14700 * time.Microsecond, 0}, {13 * ms, 1}} {
		var recs []*event.Request
		for i := range 3 {
			recs = append(recs, gapStream(fmt.Sprint("s", i), 200*ms+time.Duration(i)*tc.spacing, 30*ms))
		}
		got := detect(t, recs)
		if len(got) != tc.want {
			t.Fatalf("gaps %s apart: %d markers, want %d: %+v", tc.spacing, len(got), tc.want, got)
		}
		for _, m := range got {
			if m.Values["gap_ms"] < 1 {
				t.Errorf("marker under the floor: %s", m.Message)
			}
		}
	}
}

// A count of the probe's requests a marker states never exceeds the
// requests in flight, nor the probe's in-flight maximum.
func TestStallCountsCappedByInFlight(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	recs := fourPausing(30 * ms)
	for i := range 10 {
		recs = append(recs, oneRequest(fmt.Sprint("wait", i), 150*ms, 151*ms, 900*ms, 3))
	}
	d := New(Config{MaxInFlight: 6})
	var got []event.Marker
	for _, r := range recs {
		got = append(got, d.Add(r)...)
	}
	got = append(got, d.Flush()...)
	if len(got) != 1 || got[0].Cause != event.StallUnexplained {
		t.Fatalf("markers %+v: want one unexplained pause", got)
	}
	m := got[0]
	if m.Values["maybe_prefilling"] > 6 || m.Values["in_flight"] > 6 || !strings.Contains(m.Message, "of the 6 request(s) then in flight") {
		t.Fatalf("marker %q %v: counts above the in-flight maximum of 6", m.Message, m.Values)
	}
}

// Hostile streams (random cadences, random pauses, shared or not, requests
// waiting for a first token) never make a marker that states a pause under
// the floor, a gap under 2× the normal one, or more requests than were in
// flight.
func TestStallMarkersStayWithinTheirWholes(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	rng := rand.New(rand.NewPCG(7, 11))
	markers := 0
	for round := range 100 {
		var recs []*event.Request
		streams := 3 + rng.IntN(6)
		at := time.Duration(100+rng.IntN(200)) * ms
		for i := range streams {
			itl := time.Duration(2+rng.IntN(30)) * ms
			pause := time.Duration(rng.IntN(int(4 * itl)))
			start := time.Duration(rng.IntN(int(itl)))
			recs = append(recs, stallStreamRec(fmt.Sprintf("r%d-s%d", round, i), start, 20+rng.IntN(60), itl, at+time.Duration(rng.IntN(int(itl))), pause))
		}
		for i := range rng.IntN(5) {
			sent := time.Duration(rng.IntN(300)) * ms
			recs = append(recs, oneRequest(fmt.Sprintf("r%d-w%d", round, i), sent, sent+ms, sent+time.Duration(rng.IntN(900))*ms+2*ms, 3))
		}
		rng.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
		maxIn := len(recs)
		d := New(Config{MaxInFlight: maxIn})
		var got []event.Marker
		for _, r := range recs {
			got = append(got, d.Add(r)...)
		}
		got = append(got, d.Flush()...)
		for _, m := range got {
			markers++
			v := m.Values
			switch {
			case v["gap_ms"] < 1:
				t.Errorf("pause under 1 ms: %s", m.Message)
			case v["longest_gap_ms"] < 2*v["itl_ms"]:
				t.Errorf("longest gap under 2× the normal gap: %s", m.Message)
			case v["maybe_prefilling"] > v["in_flight"] || v["in_flight"] > float64(maxIn):
				t.Errorf("more requests than in flight (%d at most): %s", maxIn, m.Message)
			case v["streams"] > float64(len(recs)):
				t.Errorf("more streams than requests: %s", m.Message)
			}
		}
	}
	if markers == 0 {
		t.Fatal("no marker at all: the hostile streams test nothing")
	}
	t.Logf("%d markers checked", markers)
}
