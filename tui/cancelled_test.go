package tui

import (
	"testing"

	"github.com/latscope/latscope/event"
)

// TestFailedFilterLeavesTheCancelled: a request the run's end cut short
// did not fail: `failed` does not keep it, `cancelled` does.
func TestFailedFilterLeavesTheCancelled(t *testing.T) {
	ok := &event.Request{ID: "a", Outcome: event.OutcomeOK}
	failed := &event.Request{ID: "b", Outcome: event.OutcomeHTTPStatus, Status: 503}
	cut := &event.Request{ID: "c", Outcome: event.OutcomeCancelled, RunEnded: true}
	for _, tc := range []struct {
		filter string
		keeps  []bool // ok, failed, cut
	}{
		{"failed", []bool{false, true, false}},
		{"ok", []bool{true, false, false}},
		{"cancelled", []bool{false, false, true}},
	} {
		f, err := parseFilter(tc.filter)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range []*event.Request{ok, failed, cut} {
			if got := f.keep(r, ""); got != tc.keeps[i] {
				t.Errorf("filter %q keeps %s (%s): %t, want %t", tc.filter, r.ID, r.Outcome, got, tc.keeps[i])
			}
		}
	}
}
