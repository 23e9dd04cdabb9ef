package probe

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/latscope/latscope/event"
)

// StallConfig tunes the stall detector. Zero fields take the defaults.
type StallConfig struct {
	MinStreams int           // streams that must pause together (default 3)
	Factor     float64       // a gap is unusual above Factor × the stream's median ITL (default 5)
	MinGap     time.Duration // ... and above MinGap (default 20 ms)
	MinITLs    int           // streams with fewer gaps have no meaningful median (default 3)
	// Hold is how long after a stall ends the detector waits for more
	// streams to report it before emitting its marker (default 5 s).
	// Streams that report it later join silently: never a second marker.
	Hold time.Duration
	// Window is how far back unusual gaps and reported stalls are kept
	// (default 2 min); MaxGaps bounds their number (default 4096).
	Window  time.Duration
	MaxGaps int
}

func (c StallConfig) withDefaults() StallConfig {
	if c.MinStreams <= 0 {
		c.MinStreams = 3
	}
	if c.Factor <= 0 {
		c.Factor = 5
	}
	if c.MinGap <= 0 {
		c.MinGap = 20 * time.Millisecond
	}
	if c.MinITLs <= 0 {
		c.MinITLs = 3
	}
	if c.Hold <= 0 {
		c.Hold = 5 * time.Second
	}
	if c.Window <= 0 {
		c.Window = 2 * time.Minute
	}
	if c.MaxGaps <= 0 {
		c.MaxGaps = 4096
	}
	return c
}

// StallDetector finds pauses that several streams saw at the same time: the
// signature of a server whose event loop was blocked, as opposed to one slow
// stream. It is pure and deterministic: feed it finished request records
// (Add) and the passing of time (Advance), and it returns markers. It is not
// safe for concurrent use; the Runner feeds it from its one emitting
// goroutine.
//
// Records arrive when requests finish, long after their gaps happened and in
// any order, so a stall is first held as pending, grows as more streams
// report it, and is emitted once Hold has passed after its end (by the
// latest time seen) or on Flush.
type StallDetector struct {
	cfg    StallConfig
	gaps   []stallGap    // unusual gaps not (yet) part of a stall
	stalls []*stallGroup // pending and recently emitted stalls
	now    time.Time     // the latest time seen
}

// stallGap is one unusual pause in one stream, in absolute times.
type stallGap struct {
	id       string
	from, to time.Time
}

// stallGroup is a set of streams that were all paused during [from, to],
// the intersection of their gaps.
type stallGroup struct {
	from, to time.Time
	members  map[string]bool
	ids      []string // members in order of joining
	longest  time.Duration
	emitted  bool
}

// NewStallDetector returns a detector with cfg's thresholds.
func NewStallDetector(cfg StallConfig) *StallDetector {
	return &StallDetector{cfg: cfg.withDefaults()}
}

// Add takes one finished request and returns any stalls now complete.
func (d *StallDetector) Add(r *event.Request) []event.Marker {
	if r == nil {
		return nil
	}
	if len(r.Chunks) > 0 {
		d.advanceClock(r.Start.Add(r.Chunks[len(r.Chunks)-1].At))
	}
	for _, g := range unusualGaps(r, d.cfg) {
		d.addGap(g)
	}
	d.prune()
	return d.ripe(false)
}

// Advance moves the detector's clock to now (never backwards) and returns
// the stalls whose hold has passed.
func (d *StallDetector) Advance(now time.Time) []event.Marker {
	d.advanceClock(now)
	d.prune()
	return d.ripe(false)
}

// Flush returns every pending stall, at the end of a run.
func (d *StallDetector) Flush() []event.Marker {
	return d.ripe(true)
}

func (d *StallDetector) advanceClock(t time.Time) {
	if t.After(d.now) {
		d.now = t
	}
}

// addGap joins g to a stall it overlaps, or forms a new stall with the loose
// gaps it overlaps when enough streams paused together.
func (d *StallDetector) addGap(g stallGap) {
	for _, s := range d.stalls {
		if g.from.Before(s.to) && s.from.Before(g.to) {
			if !s.members[g.id] {
				s.join(g, !s.emitted)
			}
			return
		}
	}
	d.gaps = append(d.gaps, g)
	members, from, to := densest(d.gaps, g)
	if len(members) < d.cfg.MinStreams {
		return
	}
	s := &stallGroup{from: from, to: to, members: map[string]bool{}}
	for _, m := range members {
		s.join(m, false)
	}
	d.stalls = append(d.stalls, s)
	// Gaps now in the stall are no longer loose.
	d.gaps = slices.DeleteFunc(d.gaps, func(x stallGap) bool {
		return s.members[x.id] && x.from.Before(s.to) && s.from.Before(x.to)
	})
}

// join adds a gap's stream; narrow also shrinks the stall to the common
// pause (only while pending: an emitted marker does not change).
func (s *stallGroup) join(g stallGap, narrow bool) {
	if s.members[g.id] {
		return
	}
	s.members[g.id] = true
	s.ids = append(s.ids, g.id)
	s.longest = max(s.longest, g.to.Sub(g.from))
	if narrow {
		if g.from.After(s.from) {
			s.from = g.from
		}
		if g.to.Before(s.to) {
			s.to = g.to
		}
	}
}

// densest finds, among the loose gaps overlapping g, the instant inside g
// covered by the most distinct streams, and returns one gap per stream
// covering it with the intersection of those gaps.
func densest(gaps []stallGap, g stallGap) (members []stallGap, from, to time.Time) {
	var cand []stallGap
	for _, x := range gaps {
		if x.from.Before(g.to) && g.from.Before(x.to) {
			cand = append(cand, x)
		}
	}
	// The deepest point is at some gap's start (clipped to g).
	best := 0
	for _, c := range cand {
		at := c.from
		if at.Before(g.from) {
			at = g.from
		}
		seen := map[string]bool{}
		var cover []stallGap
		for _, x := range cand {
			if !x.from.After(at) && at.Before(x.to) && !seen[x.id] {
				seen[x.id] = true
				cover = append(cover, x)
			}
		}
		if len(cover) > best {
			best, members = len(cover), cover
		}
	}
	if len(members) == 0 {
		return nil, time.Time{}, time.Time{}
	}
	from, to = members[0].from, members[0].to
	for _, m := range members[1:] {
		if m.from.After(from) {
			from = m.from
		}
		if m.to.Before(to) {
			to = m.to
		}
	}
	return members, from, to
}

// ripe emits the pending stalls whose hold has passed (all of them when
// force is set), oldest first.
func (d *StallDetector) ripe(force bool) []event.Marker {
	var out []event.Marker
	for _, s := range d.stalls {
		if s.emitted || !(force || d.now.Sub(s.to) >= d.cfg.Hold) {
			continue
		}
		s.emitted = true
		out = append(out, s.marker())
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out
}

func (s *stallGroup) marker() event.Marker {
	pause := s.to.Sub(s.from)
	ids := slices.Clone(s.ids)
	return event.Marker{
		Time:     s.from,
		Kind:     event.MarkerStall,
		Source:   "stall-detector",
		Duration: pause,
		// The streams' gaps need not line up exactly: the longest gap says
		// how bad the pause was, the overlap how much of it they shared.
		Message: fmt.Sprintf("server event loop blocked: %d streams paused together (longest gap %.1f ms, all paused for %.1f ms)",
			len(s.ids), float64(s.longest)/float64(time.Millisecond), float64(pause)/float64(time.Millisecond)),
		Values: map[string]float64{
			"streams":        float64(len(s.ids)),
			"gap_ms":         float64(pause) / float64(time.Millisecond),
			"longest_gap_ms": float64(s.longest) / float64(time.Millisecond),
		},
		RequestIDs: ids,
	}
}

// prune drops gaps and emitted stalls older than the window, and the oldest
// gaps beyond MaxGaps, so memory stays bounded however long the run.
func (d *StallDetector) prune() {
	cutoff := d.now.Add(-d.cfg.Window)
	d.gaps = slices.DeleteFunc(d.gaps, func(g stallGap) bool { return g.to.Before(cutoff) })
	if over := len(d.gaps) - d.cfg.MaxGaps; over > 0 {
		sort.Slice(d.gaps, func(i, j int) bool { return d.gaps[i].to.Before(d.gaps[j].to) })
		d.gaps = slices.Delete(d.gaps, 0, over)
	}
	d.stalls = slices.DeleteFunc(d.stalls, func(s *stallGroup) bool { return s.emitted && s.to.Before(cutoff) })
	if over := len(d.stalls) - d.cfg.MaxGaps; over > 0 {
		// Only a flood of stalls gets here; the oldest go first, pending or not.
		d.stalls = slices.Delete(d.stalls, 0, over)
	}
}

// unusualGaps returns the stream's gaps longer than Factor × its median ITL
// and longer than MinGap, in absolute time.
func unusualGaps(r *event.Request, cfg StallConfig) []stallGap {
	itls := r.ITLs()
	if len(itls) < cfg.MinITLs || r.Start.IsZero() {
		return nil
	}
	sorted := slices.Clone(itls)
	slices.Sort(sorted)
	median := sorted[len(sorted)/2]
	if len(sorted)%2 == 0 {
		median = (sorted[len(sorted)/2-1] + sorted[len(sorted)/2]) / 2
	}
	limit := max(time.Duration(cfg.Factor*float64(median)), cfg.MinGap)
	id := r.ID
	if id == "" {
		id = fmt.Sprintf("seq-%d", r.Seq)
	}
	var out []stallGap
	for i, gap := range itls {
		if gap <= limit {
			continue
		}
		out = append(out, stallGap{
			id:   id,
			from: r.Start.Add(r.Chunks[i].At),
			to:   r.Start.Add(r.Chunks[i+1].At),
		})
	}
	return out
}
