package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// TestMarkersFoldRepeatedStalls: a run of stall markers of one cause is one
// counted line; a different cause or another kind of marker breaks the run.
func TestMarkersFoldRepeatedStalls(t *testing.T) {
	begin := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	stall := func(sec int, cause event.StallCause) event.Marker {
		return event.Marker{Time: begin.Add(time.Duration(sec) * time.Second), Kind: event.MarkerStall, Cause: cause,
			Message: string(cause) + " at " + time.Duration(sec*int(time.Second)).String()}
	}
	snap := &aggregate.Snapshot{Now: begin.Add(time.Minute), Elapsed: time.Minute}
	snap.Markers.Recent = []event.Marker{
		stall(10, event.StallPrefillInterference),
		stall(11, event.StallPrefillInterference),
		{Time: begin.Add(12 * time.Second), Kind: event.MarkerNote, Message: "load step: 16 concurrent streams"},
		stall(13, event.StallPrefillInterference),
		stall(14, event.StallPrefillInterference),
		stall(15, event.StallPrefillInterference),
		stall(16, event.StallUnexplained),
	}
	rows := markerRows(snap)
	var got []string
	for _, r := range rows {
		got = append(got, string(r.cause)+"×"+string(rune('0'+r.count)))
	}
	want := []string{"unexplained×1", "prefill_interference×3", "×1", "prefill_interference×2"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("rows %v, want %v", got, want)
	}

	lines := renderMarkers(newStyles(plainRenderer(), true), rows, 120, 10)
	if !strings.Contains(lines[1], "×3 since 0:13 · prefill_interference at 15s") {
		t.Errorf("folded line %q: want the count, the oldest time and the newest marker", lines[1])
	}
	if strings.Contains(lines[0], "×") {
		t.Errorf("a single marker is not counted: %q", lines[0])
	}
}

// TestWrapKeepsWordsWhole: a word that fits a line is never cut, however
// early the last space before the width comes.
func TestWrapKeepsWordsWhole(t *testing.T) {
	s := "estimated (server_window_less_first_frame (client's server window less the server's reported arrival))"
	for _, width := range []int{20, 33, 47, 60} {
		lines := wrap(s, width)
		whole := map[string]bool{}
		for _, line := range lines {
			if len([]rune(line)) > width {
				t.Errorf("width %d: line %q is longer", width, line)
			}
			for _, w := range strings.Fields(line) {
				whole[w] = true
			}
		}
		for _, w := range strings.Fields(s) {
			if len([]rune(w)) <= width && !whole[w] {
				t.Errorf("width %d: %q was cut: %q", width, w, lines)
			}
		}
	}
}
