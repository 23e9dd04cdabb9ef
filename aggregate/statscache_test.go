package aggregate

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestStatsCacheAnswersAsAFreshMerge checks the per-window cache of a
// metric's stats against merging afresh, while values (some negative)
// arrive out of order and the windows' ends move on with and without new
// values: a cached answer is never one the data no longer gives.
func TestStatsCacheAnswersAsAFreshMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	m, mg, fresh := newMetric(), newMerger(), newMerger()
	t0 := time.Unix(1_700_000_000, 0)
	now := t0
	for step := range 2000 {
		now = now.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
		if rng.IntN(3) == 0 { // a value, now or up to 20 s ago
			at := now.Add(-time.Duration(rng.IntN(20_000)) * time.Millisecond)
			m.record(at, int64(rng.IntN(200_000))-20_000)
		}
		for w := Window(0); w < NumWindows; w++ {
			got := mg.stats(m, w, now)
			var want Stats
			if w == WinRun {
				want = fresh.whole(m)
			} else {
				fine, from, to, _ := bounds(w, now)
				want = fresh.window(m, fine, from, to)
			}
			if got != want {
				t.Fatalf("step %d, window %d at %s: cached %+v, fresh %+v", step, w, now.Sub(t0), got, want)
			}
		}
	}
}
