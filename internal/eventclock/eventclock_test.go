package eventclock

import (
	"testing"
	"time"
)

// TestClockNeverGoesBack: a reading before the last stamp is stamped with
// the last; later readings pass unchanged.
func TestClockNeverGoesBack(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	readings := []time.Time{base, base.Add(time.Second), base.Add(-time.Minute), base.Add(2 * time.Second)}
	want := []time.Time{base, base.Add(time.Second), base.Add(time.Second), base.Add(2 * time.Second)}
	i := 0
	c := New(func() time.Time { i++; return readings[i-1] })
	for j, w := range want {
		if got := c.Now(); !got.Equal(w) {
			t.Errorf("reading %d: got %v, want %v", j, got, w)
		}
	}
	if got := c.Stamp(base); !got.Equal(base.Add(2 * time.Second)) {
		t.Errorf("Stamp of an earlier time: got %v, want the last stamp", got)
	}
}
