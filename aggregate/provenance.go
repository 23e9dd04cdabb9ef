package aggregate

import (
	"time"

	"github.com/latscope/latscope/event"
)

// Mixed is a stage's provenance over a window when no single provenance
// covers more than half of its values.
const Mixed event.Provenance = "mixed"

// ProvenanceMix counts one stage's values by provenance.
type ProvenanceMix struct {
	Measured  int64 `json:"measured,omitempty"`
	Server    int64 `json:"server,omitempty"`
	Estimated int64 `json:"estimated,omitempty"`
	Other     int64 `json:"other,omitempty"`
}

func (p *ProvenanceMix) add(pr event.Provenance) {
	switch pr {
	case event.Measured:
		p.Measured++
	case event.ServerReported:
		p.Server++
	case event.Estimated:
		p.Estimated++
	default:
		p.Other++
	}
}

func (p *ProvenanceMix) merge(o ProvenanceMix) {
	p.Measured += o.Measured
	p.Server += o.Server
	p.Estimated += o.Estimated
	p.Other += o.Other
}

// Total is how many values were counted.
func (p ProvenanceMix) Total() int64 { return p.Measured + p.Server + p.Estimated + p.Other }

// Main is the provenance of more than half of the values, Mixed when none
// has that many, "" when there are none. A legend marks a stage estimated
// by this, not by any single request's provenance.
func (p ProvenanceMix) Main() event.Provenance {
	n := p.Total()
	for _, c := range []struct {
		prov  event.Provenance
		count int64
	}{{event.Measured, p.Measured}, {event.ServerReported, p.Server}, {event.Estimated, p.Estimated}} {
		if 2*c.count > n {
			return c.prov
		}
	}
	if n == 0 {
		return ""
	}
	return Mixed
}

// provTracker counts a stage's provenances per time slot, for the windows.
type provTracker struct {
	fine, coarse *ring[ProvenanceMix]
}

func newProvTracker() provTracker {
	reset := func(p *ProvenanceMix) { *p = ProvenanceMix{} }
	return provTracker{fine: newRing(fineWidth, fineSlots, reset), coarse: newRing(coarseWidth, coarseSlots, reset)}
}

func (t provTracker) add(at time.Time, pr event.Provenance) {
	for _, r := range []*ring[ProvenanceMix]{t.fine, t.coarse} {
		if s := r.slot(at); s != nil {
			s.add(pr)
		}
	}
}

// window sums the slots window w covers at now (not for WinRun).
func (t provTracker) window(w Window, now time.Time) ProvenanceMix {
	fine, from, to, _ := bounds(w, now)
	r := t.coarse
	if fine {
		r = t.fine
	}
	var mix ProvenanceMix
	r.each(from, to, func(p *ProvenanceMix) { mix.merge(*p) })
	return mix
}
