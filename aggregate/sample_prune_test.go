package aggregate

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// The coarse ring drops requests that can never again be listed; the lists
// must be exactly what keeping every request would give, for a snapshot at
// the newest request and for one a slot behind it (whose lists reach the
// newest request all the same, as the latest list does).
func TestSamplerPruningKeepsTheListsExact(t *testing.T) {
	t0 := base()
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		const keep = 4
		s := newRequestSampler(keep)
		var all []*event.Request
		end := t0
		for i := range 3000 {
			end = end.Add(time.Duration(rng.IntN(400)) * time.Millisecond)
			// Even seeds: few distinct ranks, so ties are decided by the
			// end time.
			ttft := time.Duration(1+rng.IntN(30)) * time.Millisecond
			if seed%2 == 1 {
				ttft = time.Duration(1+rng.IntN(1e6)) * time.Microsecond
			}
			r := sampleReq(i, end, ttft)
			s.add(r)
			all = append(all, r)
			if i%97 != 0 {
				continue
			}
			for _, now := range []time.Time{end, end.Add(-10 * time.Second)} {
				got := s.sample(now)
				for w, n := range map[Window]int{Win1m: 6, Win5m: 30} {
					want := bruteSlowest(all, end, end, 10*time.Second, n, keep)
					if !slices.Equal(ids(got.Slowest[w]), want) {
						t.Fatalf("seed %d after %d requests, now %v: %v lists %v, want %v",
							seed, i+1, now.Sub(t0), w, ids(got.Slowest[w]), want)
					}
				}
			}
		}
		held := 0
		for _, slot := range s.coarse.slots {
			held += len(slot.items)
		}
		if held > 8*keep {
			t.Errorf("seed %d: the coarse ring holds %d requests, want about keep × (2 + ln 30) = %d", seed, held, 5*keep)
		}
	}
}

// bruteSlowest lists the keep slowest of every request whose end falls in
// the n slots of width ending with now's, as the lists order them, among the
// 30 slots ending with newest's that the ring can hold at all.
func bruteSlowest(all []*event.Request, newest, now time.Time, width time.Duration, n, keep int) []string {
	r := newSampleRing(width, 1, 1)
	to, reach := r.epoch(now), r.epoch(newest)-30
	var in []ranked
	for _, q := range all {
		if e := r.epoch(q.EndedAt()); e > to-int64(n) && e <= to && e > reach {
			in = append(in, ranked{key: rank(q), r: q})
		}
	}
	var out []string
	for _, it := range slowest(in, keep) {
		out = append(out, it.r.ID)
	}
	return out
}
