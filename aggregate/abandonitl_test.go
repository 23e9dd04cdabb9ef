package aggregate

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// Gaps within two seconds after an abandonment are filed apart from the
// rest: streams that read 30 ms gaps after it and 10 ms gaps before it show
// both, in the summary and the table.
func TestOtherStreamsITLAfterAnAbandonment(t *testing.T) {
	a := New(Config{})
	at := base()
	ab := okReq(at, 100*time.Millisecond, 10*time.Millisecond, 4)
	ab.Outcome = event.OutcomeAbandoned
	ab.Abandon = &event.Abandon{Rule: "tokens=4", At: 5 * time.Second}
	// Before the abandonment (at+5s): 10 ms gaps.
	before := okReq(at.Add(time.Second), 100*time.Millisecond, 10*time.Millisecond, 11)
	// Within 2 s after it: 30 ms gaps.
	after := okReq(at.Add(5*time.Second), 100*time.Millisecond, 30*time.Millisecond, 11)
	// Long after it: 10 ms gaps.
	late := okReq(at.Add(20*time.Second), 100*time.Millisecond, 10*time.Millisecond, 11)
	addAll(a, before, ab, after, late)
	s := a.Final().Summary()
	x := s.Abandoned
	if x == nil || x.ITLAfter == nil || x.ITLRest == nil {
		t.Fatalf("abandoned %+v", x)
	}
	if x.ITLAfter.Count != 10 || x.ITLAfter.P50 < 29.9 || x.ITLAfter.P50 > 30.1 {
		t.Errorf("itl after %+v, want 10 gaps of 30 ms", *x.ITLAfter)
	}
	// The first request ended before the abandonment arrived: its gaps are
	// not filed; the late one's are the rest.
	if x.ITLRest.Count != 10 || x.ITLRest.P50 < 9.9 || x.ITLRest.P50 > 10.1 {
		t.Errorf("itl rest %+v, want 10 gaps of 10 ms", *x.ITLRest)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "Other streams' ITL within 2000 ms after an abandonment: p50 30.00") {
		t.Errorf("table:\n%s", b.String())
	}
}

// The remembered abandonments stay bounded and sorted whatever order they
// come in.
func TestAbandonITLBounded(t *testing.T) {
	var s abandonITL
	at := base()
	for i := range 3 * maxAbandonTimes {
		s.note(at.Add(time.Duration((i*7919)%10000) * time.Millisecond))
	}
	s.note(time.Time{})
	if len(s.times) != maxAbandonTimes {
		t.Fatalf("%d times", len(s.times))
	}
	for i := 1; i < len(s.times); i++ {
		if s.times[i].Before(s.times[i-1]) {
			t.Fatalf("not sorted at %d", i)
		}
	}
}
