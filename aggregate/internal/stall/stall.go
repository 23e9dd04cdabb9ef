// Package stall finds the pauses that several of a probe's streams shared,
// and names their cause from the evidence: a prefill, the server's front
// end, or the probe itself. It is the aggregator's (aggregate.ProbeJudge
// feeds it one probe's raw stream); nothing else uses it.
package stall

import (
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/latscope/latscope/event"
)

// Config tunes the stall detector. Zero fields take the defaults.
//
// A gap is a stream's time between two reads that brought content. It is
// strong when it is over Factor × the stream's median gap and over MinGap:
// MinStreams streams with strong gaps at one moment make a stall. It is
// weak when it is at least WeakFactor × the median and MinExcess over it:
// one stream's weak gap means little, but when most of the streams that
// were streaming at that moment (Share of them, and at least MinStreams, or
// at least two when they are all the streams then streaming) paused
// together, the correlation is the evidence.
//
// The floor: a stall is reported only when every stream in it had a gap of
// at least 2× its normal (median) gap (WeakFactor is never below 2) and
// the pause they shared, the figure its marker states, is at least
// MinPause (1 ms). Below it, "N streams paused together for 0.0 ms" would
// be the overlap of unrelated gaps, not a pause.
type Config struct {
	MinStreams int           // streams that must pause together (default 3)
	Factor     float64       // strong gap: above Factor × the stream's median (default 5)
	MinGap     time.Duration // ... and above MinGap (default 20 ms)
	WeakFactor float64       // weak gap: at least WeakFactor × the median (default and least 2)
	MinExcess  time.Duration // ... and at least MinExcess longer than it (default 10 ms)
	Share      float64       // weak stall: share of the streams then streaming (default 0.5)
	MinITLs    int           // streams with fewer gaps have no meaningful median (default 3)
	// MinPause is the least shared pause a stall marker reports (default
	// and least 1 ms).
	MinPause time.Duration
	// MaxInFlight is the most requests the probe has in flight (its
	// concurrency, or its open-loop cap): no count a marker states of the
	// probe's requests exceeds it (0: no cap but the requests seen).
	MaxInFlight int
	// Server is what is known of the server's design (see Server): the
	// zero value takes only the server's own timing as evidence of a cause.
	Server Server
	// Hold is how long after a stall ends the detector waits for more
	// streams to report it before emitting its marker (default 5 s).
	// Streams that report it later join silently: never a second marker.
	// While a request that was sent before the stall ended has not
	// reported, the detector waits longer, up to MaxHold (default 30 s):
	// that request may hold the evidence of the cause.
	Hold    time.Duration
	MaxHold time.Duration
	// Window is how far back unusual gaps and reported stalls are kept
	// (default 2 min); MaxGaps bounds their number (default 4096), and
	// MaxRequests the requests kept as evidence (default 16384).
	Window      time.Duration
	MaxGaps     int
	MaxRequests int
}

// The stall floor (see Config): no member's gap under 2× its normal
// gap, no shared pause under 1 ms.
const (
	minWeakFactor = 2
	minPause      = time.Millisecond
)

// minCorrelated is the fewest streams whose weak gaps make a stall: when
// they are every stream streaming across it (see qualifies).
const minCorrelated = 2

func (c Config) withDefaults() Config {
	if c.MinStreams <= 0 {
		c.MinStreams = 3
	}
	if c.Factor <= 0 {
		c.Factor = 5
	}
	if c.MinGap <= 0 {
		c.MinGap = 20 * time.Millisecond
	}
	if c.WeakFactor < minWeakFactor {
		c.WeakFactor = minWeakFactor
	}
	if c.MinPause < minPause {
		c.MinPause = minPause
	}
	if c.MinExcess <= 0 {
		c.MinExcess = 10 * time.Millisecond
	}
	if c.Share <= 0 {
		c.Share = 0.5
	}
	if c.MinITLs <= 0 {
		c.MinITLs = 3
	}
	if c.Hold <= 0 {
		c.Hold = 5 * time.Second
	}
	if c.MaxHold < c.Hold {
		c.MaxHold = max(30*time.Second, c.Hold)
	}
	if c.Window <= 0 {
		c.Window = 2 * time.Minute
	}
	if c.MaxGaps <= 0 {
		c.MaxGaps = 4096
	}
	if c.MaxRequests <= 0 {
		c.MaxRequests = 16384
	}
	return c
}

// Detector finds pauses that several streams saw at the same time and
// names their cause from the evidence (see classify): a prefill, the
// server's front end, or the probe itself. It is pure and deterministic:
// feed it finished request records (Add), the requests it should wait for
// (Sent), the probe's own late moments (Starved) and the passing of time
// (Advance), and it returns markers. Its times are wall-clock times only
// (a monotonic reading is dropped as each comes in), as a recording keeps
// them, so a replay decides what the live run decided. It is not safe for
// concurrent use; one goroutine (the aggregator's) feeds it.
//
// Records arrive when requests finish, long after their gaps happened and in
// any order, so a stall is first held as pending, grows as more streams
// report it, and is emitted once Hold has passed after its end (by the
// latest time seen) or on Flush. Stalls that follow one another without a
// normal gap between them (a long prefill in chunks) make one marker.
type Detector struct {
	cfg      Config
	gaps     []stallGap    // unusual gaps not (yet) part of a stall
	stalls   []*stallGroup // pending and recently emitted stalls
	requests []reqFacts    // finished requests, the evidence
	starved  []interval    // moments the probe's goroutines ran late
	host     []hostWindow  // the client host's CPU pressure, by interval
	inFlight map[string]time.Time
	now      time.Time     // the latest time seen
	free     []*stallGroup // pruned stalls, reused (cleared) by the next
	prunedAt time.Time     // the clock at the last prune
	scratch  scratch
}

// pruneEvery is how often (on the detector's clock) prune walks its lists:
// every finished request would make that a cost per request proportional
// to the streams in flight, and the window is minutes long.
const pruneEvery = time.Second

// interval is a stretch of absolute time.
type interval struct{ from, to time.Time }

func (s interval) dur() time.Duration { return s.to.Sub(s.from) }

// overlap is how long s and o share.
func (s interval) overlap(o interval) time.Duration {
	from, to := s.from, s.to
	if o.from.After(from) {
		from = o.from
	}
	if o.to.Before(to) {
		to = o.to
	}
	return max(to.Sub(from), 0)
}

// stallGap is one unusual pause in one stream, in absolute times.
type stallGap struct {
	id       string
	from, to time.Time
	median   time.Duration // the stream's median gap
	strong   bool
	// burst: the stream's tokens came in a burst as it resumed (see
	// heldBurst), decided from its reads when the gap is found, so the
	// detector keeps no chunk times: a request of 65,536 tokens costs
	// what one of 10 does.
	burst bool
	// settled: its hold has passed and it made no stall with the loose
	// gaps then; a later gap that overlaps it is looked at on its own.
	settled bool
}

// burstWindow is how many of a stream's normal gaps after it resumes the
// burst test looks over.
const burstWindow = 2

// heldBurst reports whether the stream, resuming with the read at resume,
// got ahead of its own cadence by a read's worth of tokens (typical)
// within burstWindow normal gaps (median): more tokens by some read than
// one read's worth at the resumption plus one per normal gap since. A
// front end that held the frames while the engine kept decoding releases
// the pause's tokens on top of the cadence, at once or over a few
// milliseconds as it works through its backlog (or as the probe gets to
// them); a pause of the engine itself ends with its next token alone, and
// the ones after come a normal gap apart.
func heldBurst(reads []time.Duration, tokens []int, resume int, median time.Duration, typical int) bool {
	if median <= 0 {
		return tokens[resume] >= 2*typical
	}
	start := reads[resume]
	got := 0
	for j := resume; j < len(reads) && reads[j]-start < burstWindow*median; j++ {
		got += tokens[j]
		cadence := float64(typical) * (1 + float64(reads[j]-start)/float64(median))
		if float64(got)-cadence >= float64(typical) {
			return true
		}
	}
	return false
}

// stallGroup is a set of streams that were all paused during [from, to],
// the intersection of their gaps.
type stallGroup struct {
	from, to time.Time
	ids      []string            // members in order of joining
	index    map[string]struct{} // ids, once there are more than indexFrom
	bursts   []bool              // with ids: whether each member resumed in a burst
	medians  runningMedian       // of the members' median gaps
	strong   int
	longest  time.Duration
	emitted  bool
}

// indexFrom is the size from which a stall indexes its members: a stall is
// the few streams in flight, found faster by a scan than by a map, and a
// map per stall would be most of the detector's growth.
const indexFrom = 32

// NewDetector returns a detector with cfg's thresholds.
//
// The detector's lists are bounded by configuration (MaxGaps, MaxRequests)
// and grow to what the run needs within those bounds: over a long run its
// memory is what it is once its 2-minute window has filled, up to about 6
// MiB at the defaults (most of it the 16,384 requests' evidence). Made at
// their bounds from the start, they were most of an all-day canary's heap,
// for a few requests a minute. Full lists drop their oldest, pruning
// deletes in place, and pruned stalls are reused.
func New(cfg Config) *Detector {
	cfg = cfg.withDefaults()
	return &Detector{cfg: cfg, inFlight: make(map[string]time.Time)}
}

// newGroup returns an empty stall over [from, to], reusing a free one.
func (d *Detector) newGroup(from, to time.Time) *stallGroup {
	n := len(d.free)
	if n == 0 {
		return &stallGroup{from: from, to: to}
	}
	s := d.free[n-1]
	d.free[n-1] = nil
	d.free = d.free[:n-1]
	clear(s.ids) // let the ids' strings go
	// A large stall's index goes with it rather than stay in the pool.
	s.medians.reset()
	*s = stallGroup{from: from, to: to, ids: s.ids[:0], bursts: s.bursts[:0], medians: s.medians}
	return s
}

// dropStalls removes the stalls drop selects, keeping them for reuse.
func (d *Detector) dropStalls(drop func(s *stallGroup) bool) {
	d.stalls = slices.DeleteFunc(d.stalls, func(s *stallGroup) bool {
		if !drop(s) {
			return false
		}
		if len(d.free) < d.cfg.MaxGaps {
			d.free = append(d.free, s)
		}
		return true
	})
}

// Sent tells the detector that request id went out at t: a stall that ends
// after t waits for its record (up to MaxHold), which may explain it.
func (d *Detector) Sent(id string, t time.Time) {
	if id != "" && len(d.inFlight) < d.cfg.MaxRequests {
		d.inFlight[id] = t.Round(0)
	}
}

// Starved tells the detector that the probe's own goroutines were held up
// from from to to (its scheduling lag): pauses the streams saw then may be
// the probe's.
func (d *Detector) Starved(from, to time.Time) {
	if from, to = from.Round(0), to.Round(0); to.After(from) {
		d.starved = appendBounded(d.starved, interval{from, to}, d.cfg.MaxGaps)
	}
}

// SetMaxInFlight raises the cap on the counts of the probe's requests a
// marker states (Config.MaxInFlight) to n, the most requests the probe has
// had in flight at once so far; a lower n changes nothing.
func (d *Detector) SetMaxInFlight(n int) {
	d.cfg.MaxInFlight = max(d.cfg.MaxInFlight, n)
}

// appendBounded appends v to list without letting it hold more than limit:
// a full list first drops its oldest eighth, so the move is paid once per
// eighth, and prune would drop them anyway.
func appendBounded[T any](list []T, v T, limit int) []T {
	if len(list) >= limit {
		list = slices.Delete(list, 0, max(len(list)-limit+1, limit/8))
	}
	return append(list, v)
}

// Add takes one finished request and returns any stalls now complete.
func (d *Detector) Add(r *event.Request) []event.Marker {
	if r == nil {
		return nil
	}
	r = wallClock(r)
	delete(d.inFlight, r.ID)
	if len(r.Chunks) > 0 {
		d.advanceClock(r.Start.Add(r.Chunks[len(r.Chunks)-1].At))
	}
	id := StreamID(r)
	reads, tokens := d.readsOf(r)
	if f, ok := factsOf(r, id, reads); ok {
		d.requests = appendBounded(d.requests, f, d.cfg.MaxRequests)
	}
	for _, g := range d.unusualGaps(r, id, reads, tokens) {
		d.addGap(g)
	}
	d.prune()
	return d.ripe(false)
}

// wallClock is r with its times' monotonic readings dropped (a copy when
// it had any): a live record's monotonic reading is taken apart from its
// wall-clock one, and a replay has only the latter.
func wallClock(r *event.Request) *event.Request {
	if r.Start == r.Start.Round(0) && r.Intended == r.Intended.Round(0) {
		return r
	}
	c := *r
	c.Start, c.Intended = r.Start.Round(0), r.Intended.Round(0)
	return &c
}

// Advance moves the detector's clock to now (never backwards) and returns
// the stalls whose hold has passed.
func (d *Detector) Advance(now time.Time) []event.Marker {
	d.advanceClock(now.Round(0))
	d.prune()
	return d.ripe(false)
}

// Flush returns every pending stall, at the end of a run.
func (d *Detector) Flush() []event.Marker {
	return d.ripe(true)
}

// SharedPause reports whether [from, to] of stream id falls in a pause
// that other streams shared: a stall, or unusual gaps of MinStreams-1
// other streams. A gap there says nothing about id's own connection.
func (d *Detector) SharedPause(id string, from, to time.Time) bool {
	s := interval{from.Round(0), to.Round(0)}
	for _, st := range d.stalls {
		if len(st.ids) >= d.cfg.MinStreams && s.overlap(interval{st.from, st.to}) > 0 {
			return true
		}
	}
	others := map[string]bool{}
	for _, g := range d.gaps {
		if g.id != id && s.overlap(interval{g.from, g.to}) > 0 {
			others[g.id] = true
		}
	}
	return len(others) >= d.cfg.MinStreams-1
}

func (d *Detector) advanceClock(t time.Time) {
	if t.After(d.now) {
		d.now = t
	}
}

// addGap joins g to a stall it overlaps, or forms a new stall with the loose
// gaps it overlaps when enough streams paused together.
func (d *Detector) addGap(g stallGap) {
	for _, s := range d.stalls {
		// A gap that only grazes a stall (the stream's next slow step,
		// its frames flushed a little before the others') is not in it.
		if ov := s.span().overlap(interval{g.from, g.to}); 2*ov >= s.span().dur() {
			if !s.has(g.id) {
				s.join(g, !s.emitted)
			}
			return
		}
	}
	d.gaps = appendBounded(d.gaps, g, d.cfg.MaxGaps)
	members, from, to := densest(d.gaps, g)
	if len(members) < d.cfg.MinStreams {
		return
	}
	d.group(members, from, to)
}

// group makes a stall of members over [from, to]; their gaps are no
// longer loose.
func (d *Detector) group(members []stallGap, from, to time.Time) {
	s := d.newGroup(from, to)
	for _, m := range members {
		s.join(m, false)
	}
	d.stalls = append(d.stalls, s)
	// Gaps now in the stall are no longer loose.
	d.gaps = slices.DeleteFunc(d.gaps, func(x stallGap) bool {
		return s.has(x.id) && x.from.Before(s.to) && s.from.Before(x.to)
	})
}

// join adds a gap's stream; narrow also shrinks the stall to the common
// pause (only while pending: an emitted marker does not change).
func (s *stallGroup) join(g stallGap, narrow bool) {
	if s.has(g.id) {
		return
	}
	s.ids = append(s.ids, g.id)
	switch {
	case s.index != nil:
		s.index[g.id] = struct{}{}
	case len(s.ids) > indexFrom:
		s.index = make(map[string]struct{}, 2*len(s.ids))
		for _, id := range s.ids {
			s.index[id] = struct{}{}
		}
	}
	s.bursts = append(s.bursts, g.burst)
	s.medians.add(g.median)
	if g.strong {
		s.strong++
	}
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

// has reports whether stream id is a member.
func (s *stallGroup) has(id string) bool {
	if s.index != nil {
		_, ok := s.index[id]
		return ok
	}
	return slices.Contains(s.ids, id)
}

// span is the pause the members shared.
func (s *stallGroup) span() interval { return interval{s.from, s.to} }

// itl is the members' typical gap: the median of their medians.
func (s *stallGroup) itl() time.Duration { return s.medians.value() }

// densest finds, among the loose gaps overlapping g, the instant inside g
// covered by the most distinct streams, and returns one gap per stream
// covering it with the intersection of those gaps. Of equally deep
// instants it takes the one whose gaps share the longest stretch: where
// one slow step ends and the next begins, streams flushed in a different
// order cover the same instant with gaps of different steps.
func densest(gaps []stallGap, g stallGap) (members []stallGap, from, to time.Time) {
	var cand []stallGap
	for _, x := range gaps {
		if x.from.Before(g.to) && g.from.Before(x.to) {
			cand = append(cand, x)
		}
	}
	// The deepest point is at some gap's start (clipped to g).
	var best time.Duration
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
		f, t := intersection(cover)
		if len(cover) > len(members) || len(cover) == len(members) && t.Sub(f) > best {
			members, from, to, best = cover, f, t, t.Sub(f)
		}
	}
	return members, from, to
}

// intersection is the stretch every gap of gs covers.
func intersection(gs []stallGap) (from, to time.Time) {
	if len(gs) == 0 {
		return time.Time{}, time.Time{}
	}
	from, to = gs[0].from, gs[0].to
	for _, m := range gs[1:] {
		if m.from.After(from) {
			from = m.from
		}
		if m.to.Before(to) {
			to = m.to
		}
	}
	return from, to
}

// ripe emits the pending stalls whose hold has passed (all of them when
// force is set), oldest first. Stalls that follow one another closely are
// decided together, so a run of them waits for its last one.
func (d *Detector) ripe(force bool) []event.Marker {
	d.groupFew(force)
	var pending []*stallGroup
	for _, s := range d.stalls {
		if !s.emitted {
			pending = append(pending, s)
		}
	}
	sort.SliceStable(pending, func(i, j int) bool { return pending[i].from.Before(pending[j].from) })
	var out []event.Marker
	for _, run := range d.runs(pending) {
		if !force && !d.held(run[len(run)-1]) {
			continue
		}
		for _, s := range run {
			s.emitted = true
		}
		out = append(out, d.decide(run)...)
	}
	return out
}

// groupFew makes stalls of fewer than MinStreams loose gaps that overlap,
// once their hold has passed (every stream that shared them has had time to
// report, and join a larger stall instead). Whether such a stall counts is
// qualifies' to say: only when its streams are all that were streaming.
func (d *Detector) groupFew(force bool) {
	for i := 0; i < len(d.gaps); i++ {
		g := d.gaps[i]
		if g.settled || !force && d.now.Sub(g.to) < d.cfg.Hold {
			continue
		}
		members, from, to := densest(d.gaps, g)
		if len(members) < minCorrelated || !to.After(from) {
			// Without this, every request would look at every lone gap
			// of the window again.
			d.gaps[i].settled = true
			continue
		}
		d.group(members, from, to)
		i = -1 // the loose gaps changed: look again from the start
	}
}

// held reports whether s's hold has passed: Hold after its end, and every
// request sent before it ended has reported or MaxHold has passed.
func (d *Detector) held(s *stallGroup) bool {
	waited := d.now.Sub(s.to)
	if waited < d.cfg.Hold {
		return false
	}
	if waited >= d.cfg.MaxHold {
		return true
	}
	for _, sent := range d.inFlight {
		if sent.Before(s.to) {
			return false
		}
	}
	return true
}

// runs splits stalls (sorted by start) into runs of stalls that follow one
// another with no more than about two normal gaps between them. A run is
// cut at MaxHold long, so one that never ends is still reported.
func (d *Detector) runs(stalls []*stallGroup) [][]*stallGroup {
	var out [][]*stallGroup
	for _, s := range stalls {
		if n := len(out); n > 0 {
			run := out[n-1]
			last := run[len(run)-1]
			if s.from.Sub(last.to) <= 2*max(last.itl(), s.itl()) && s.to.Sub(run[0].from) < d.cfg.MaxHold {
				out[n-1] = append(out[n-1], s)
				continue
			}
		}
		out = append(out, []*stallGroup{s})
	}
	return out
}

// qualifies reports whether s is a stall: above the floor (a shared pause
// of at least MinPause), with enough strong gaps, or weak ones shared by
// most of the streams that were streaming across it.
func (d *Detector) qualifies(s *stallGroup) bool {
	if s.span().dur() < d.cfg.MinPause {
		return false
	}
	n := len(s.ids)
	if s.strong >= d.cfg.MinStreams {
		return true
	}
	if n < minCorrelated {
		return false
	}
	active := 0
	for _, f := range d.requests {
		if f.streamed.from.Before(s.from) && f.streamed.to.After(s.to) {
			active++
		}
	}
	// Fewer than MinStreams make a stall only when they are every stream
	// that was streaming across it: with long prompts in prefill, two
	// streams may be all that decode, and both pausing is the evidence.
	if n < d.cfg.MinStreams && active != n {
		return false
	}
	return float64(n) >= d.cfg.Share*float64(max(active, n))
}

// prune drops gaps, evidence and emitted stalls older than the window, and
// the oldest beyond their bounds, so memory stays bounded however long the
// run.
func (d *Detector) prune() {
	if d.now.Sub(d.prunedAt) < pruneEvery && len(d.stalls) <= d.cfg.MaxGaps {
		return // the lists are kept within their bounds as they grow
	}
	d.prunedAt = d.now
	cutoff := d.now.Add(-d.cfg.Window)
	d.gaps = slices.DeleteFunc(d.gaps, func(g stallGap) bool { return g.to.Before(cutoff) })
	if over := len(d.gaps) - d.cfg.MaxGaps; over > 0 {
		sort.Slice(d.gaps, func(i, j int) bool { return d.gaps[i].to.Before(d.gaps[j].to) })
		d.gaps = slices.Delete(d.gaps, 0, over)
	}
	d.dropStalls(func(s *stallGroup) bool { return s.emitted && s.to.Before(cutoff) })
	if over := len(d.stalls) - d.cfg.MaxGaps; over > 0 {
		// Only a flood of stalls gets here; the oldest go first, pending or not.
		d.dropStalls(func(*stallGroup) bool { over--; return over >= 0 })
	}
	d.requests = slices.DeleteFunc(d.requests, func(f reqFacts) bool { return f.end.Before(cutoff) })
	if over := len(d.requests) - d.cfg.MaxRequests; over > 0 {
		d.requests = slices.Delete(d.requests, 0, over)
	}
	d.starved = slices.DeleteFunc(d.starved, func(s interval) bool { return s.to.Before(cutoff) })
	if over := len(d.starved) - d.cfg.MaxGaps; over > 0 {
		d.starved = slices.Delete(d.starved, 0, over)
	}
	d.host = slices.DeleteFunc(d.host, func(w hostWindow) bool { return w.to.Before(cutoff) })
	for id, t := range d.inFlight {
		if t.Before(d.now.Add(-d.cfg.Window - d.cfg.MaxHold)) {
			delete(d.inFlight, id) // never reported: stop waiting for it
		}
	}
}

// unusualGaps returns the stream's unusual gaps between reads (see
// readsOf), in absolute time. It runs for every request on the
// aggregator's goroutine, so it works in the detector's scratch space and
// allocates only for the gaps it returns.
func (d *Detector) unusualGaps(r *event.Request, id string, reads []time.Duration, tokens []int) []stallGap {
	cfg := d.cfg
	if len(reads) < cfg.MinITLs+1 || r.Start.IsZero() {
		return nil
	}
	gaps := d.scratch.gaps[:0]
	for i := 1; i < len(reads); i++ {
		gaps = append(gaps, reads[i]-reads[i-1])
	}
	d.scratch.gaps = gaps
	d.scratch.sortD = append(d.scratch.sortD[:0], gaps...)
	median := medianOf(d.scratch.sortD)
	d.scratch.sortI = append(d.scratch.sortI[:0], tokens...)
	typical := max(medianInt(d.scratch.sortI), 1)
	strongAbove := max(time.Duration(cfg.Factor*float64(median)), cfg.MinGap)
	weakFrom := max(time.Duration(cfg.WeakFactor*float64(median)), median+cfg.MinExcess)
	var out []stallGap
	for i, gap := range gaps {
		strong := gap > strongAbove
		if !strong && gap < weakFrom {
			continue
		}
		out = append(out, stallGap{
			id: id, from: r.Start.Add(reads[i]), to: r.Start.Add(reads[i+1]),
			median: median, strong: strong,
			burst: heldBurst(reads, tokens, i+1, median, typical),
		})
	}
	return out
}

// scratch is the detector's working space for one request: reused, so a
// request's reads cost no allocation.
type scratch struct {
	reads, gaps, sortD []time.Duration
	tokens, sortI      []int
}

// readsOf returns the distinct arrival offsets of r's content chunks (one
// per read from the socket: events that arrived in one read are one
// arrival, so a stream whose server coalesces frames has its gaps between
// the reads, not zeros) and the tokens each read brought (a chunk counts
// at least one), in the detector's scratch space: valid until the next
// request.
func (d *Detector) readsOf(r *event.Request) (at []time.Duration, tokens []int) {
	at, tokens = d.scratch.reads[:0], d.scratch.tokens[:0]
	for i, c := range r.Chunks {
		if i == 0 || c.At != r.Chunks[i-1].At {
			at = append(at, c.At)
			tokens = append(tokens, 0)
		}
		tokens[len(tokens)-1] += int(max(c.Tokens, 1))
	}
	d.scratch.reads, d.scratch.tokens = at, tokens
	return at, tokens
}

// medianInt returns the median of xs (sorted in place; the upper one of
// an even count).
func medianInt(xs []int) int {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// medianOf returns the median of ds (sorted in place).
func medianOf(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	n := len(ds)
	if n%2 == 0 {
		return (ds[n/2-1] + ds[n/2]) / 2
	}
	return ds[n/2]
}

// StreamID names r in the detector (and in a stall marker's RequestIDs):
// its id, or its sequence number.
func StreamID(r *event.Request) string {
	if r.ID != "" {
		return r.ID
	}
	return "seq-" + strconv.FormatUint(r.Seq, 10)
}
