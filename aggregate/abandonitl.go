package aggregate

import (
	"slices"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/latscope/latscope/event"
)

// The other streams' ITL around abandonments: a server that keeps decoding
// an abandoned request for nobody keeps its batch large, so the streams
// still reading see longer gaps until it stops. Each inter-token gap of a
// successful request that ends within AbandonITLWindow after an
// abandonment (the probe closing a stream) is filed as "after", every
// other gap as "rest". Records arrive in the order their requests end, so
// an abandonment is known before the streams that outlived it.

// AbandonITLWindow is how long after an abandonment a gap counts as after
// it.
const AbandonITLWindow = 2 * time.Second

// maxAbandonTimes bounds the abandonments remembered (the newest kept).
const maxAbandonTimes = 4096

// abandonITL splits the gaps.
type abandonITL struct {
	times        []time.Time // abandonments, sorted
	after, rest  tally
	hAfter, hRst *hdr.Histogram
}

// note remembers an abandonment at t.
func (s *abandonITL) note(t time.Time) {
	if t.IsZero() {
		return
	}
	if len(s.times) >= maxAbandonTimes {
		s.times = slices.Delete(s.times, 0, 1) // the oldest
	}
	i, _ := slices.BinarySearchFunc(s.times, t, time.Time.Compare)
	s.times = slices.Insert(s.times, i, t)
}

// addGaps files r's gaps (only once an abandonment has been seen).
func (s *abandonITL) addGaps(r *event.Request) {
	if len(s.times) == 0 || len(r.Chunks) < 2 || r.Start.IsZero() {
		return
	}
	start := r.Start.Round(0)
	for i := 1; i < len(r.Chunks); i++ {
		gap := r.Chunks[i].At - r.Chunks[i-1].At
		us, _ := clamp(int64(gap / time.Microsecond))
		if us <= 0 {
			continue
		}
		if s.near(start.Add(r.Chunks[i].At)) {
			s.after.add(us)
			s.hAfter = record(s.hAfter, us)
		} else {
			s.rest.add(us)
			s.hRst = record(s.hRst, us)
		}
	}
}

func record(h *hdr.Histogram, us int64) *hdr.Histogram {
	if h == nil {
		h = hdr.New(histLowest, histHighest, 3)
	}
	_ = h.RecordValue(us)
	return h
}

// near reports whether t falls within AbandonITLWindow after any
// abandonment remembered.
func (s *abandonITL) near(t time.Time) bool {
	i, found := slices.BinarySearchFunc(s.times, t, time.Time.Compare)
	if found {
		return true
	}
	return i > 0 && t.Sub(s.times[i-1]) <= AbandonITLWindow
}

// fill sets the split's statistics on out (left empty without gaps on
// either side).
func (s *abandonITL) fill(out *Abandoned) {
	if s.after.n == 0 || s.rest.n == 0 {
		return
	}
	after := finishStats(s.after, s.hAfter.ValueAtPercentilesSlice(statsPercentiles[:]))
	rest := finishStats(s.rest, s.hRst.ValueAtPercentilesSlice(statsPercentiles[:]))
	out.ITLAfter, out.ITLRest = &after, &rest
	out.ITLWindowMs = float64(AbandonITLWindow / time.Millisecond)
}
