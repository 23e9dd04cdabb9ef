package stall

import (
	"fmt"
	"strings"
	"time"

	"github.com/latscope/latscope/event"
)

// Host pressure thresholds: a pause in which the client host's CPUs were
// this contended is the host's, not the server's (see hostOver).
const (
	// HostPSIBusy is the share of time some runnable task waited for a CPU
	// (PSI cpu some) from which the host is saturated.
	HostPSIBusy = 0.10
	// HostStealBusy is the share of the CPUs' time the hypervisor gave to
	// other guests from which the host is saturated.
	HostStealBusy = 0.10
	// HostSelfMax is latscope's own CPU use, in cores, below which a busy
	// host is others' load: at or over it, latscope itself may be what
	// keeps the CPUs busy, and the probe's own verdict stands.
	HostSelfMax = 0.5
)

// hostWindow is one host sample's interval and its pressure.
type hostWindow struct {
	interval
	psi, steal float64 // shares 0..1; negative when unknown
	self       float64 // latscope's CPU, cores; negative when unknown
}

// HostPressure is the client host's CPU pressure over one interval, as
// the host collector measured it: shares 0..1 of PSI cpu some and of
// steal, and latscope's own CPU in cores; a negative figure is unknown.
type HostPressure struct {
	From, To   time.Time
	PSI, Steal float64
	SelfCPU    float64
}

// HostPressureOf returns h's pressure over its interval; false for a
// sample without one (the first, or an unavailable host).
func HostPressureOf(h *event.HostSample) (HostPressure, bool) {
	if h == nil || !h.Available || h.Interval <= 0 || h.PSISome == nil && h.Steal == nil {
		return HostPressure{}, false
	}
	p := HostPressure{From: h.Time.Add(-h.Interval), To: h.Time, PSI: -1, Steal: -1, SelfCPU: -1}
	if h.PSISome != nil {
		p.PSI = *h.PSISome
	}
	if h.Steal != nil {
		p.Steal = *h.Steal
	}
	if h.SelfCPU != nil {
		p.SelfCPU = *h.SelfCPU
	}
	return p, true
}

// Host tells the detector the client host's CPU pressure over an
// interval: pauses in an interval of a saturated host are the host's.
func (d *Detector) Host(p HostPressure) {
	from, to := p.From.Round(0), p.To.Round(0)
	if !to.After(from) {
		return
	}
	d.host = appendBounded(d.host, hostWindow{interval: interval{from, to}, psi: p.PSI, steal: p.Steal, self: p.SelfCPU}, d.cfg.MaxGaps)
}

// hostOver: the client host's samples cover at least half the pause, and
// over what they cover (weighted by overlap) PSI cpu some or steal is at
// its threshold while latscope itself used under HostSelfMax of a core.
// The host's delays are then in the gaps: the probe read late, or its
// goroutines ran late, because other processes had the CPUs.
func (d *Detector) hostOver(s *stallGroup) (verdict, bool) {
	p := s.span()
	var covered, psiW, stealW, selfW time.Duration
	var psi, steal, self float64
	for _, w := range d.host {
		ov := p.overlap(w.interval)
		if ov <= 0 {
			continue
		}
		covered += ov
		if w.psi >= 0 {
			psi += w.psi * float64(ov)
			psiW += ov
		}
		if w.steal >= 0 {
			steal += w.steal * float64(ov)
			stealW += ov
		}
		if w.self >= 0 {
			self += w.self * float64(ov)
			selfW += ov
		}
	}
	if p.dur() <= 0 || 2*covered < p.dur() {
		return verdict{}, false
	}
	psi, steal, self = weighted(psi, psiW), weighted(steal, stealW), weighted(self, selfW)
	if psi < HostPSIBusy && steal < HostStealBusy || self >= HostSelfMax {
		return verdict{}, false
	}
	// The label names the figure that crossed its threshold; the evidence
	// every figure known.
	values := map[string]float64{}
	var figures []string
	if psi >= 0 {
		values["host_psi_cpu_some"] = psi
		figures = append(figures, fmt.Sprintf("PSI cpu some %.0f%%", 100*psi))
	}
	if steal >= 0 {
		values["host_steal"] = steal
		figures = append(figures, fmt.Sprintf("steal %.0f%%", 100*steal))
	}
	figure := figures[0]
	if psi < HostPSIBusy {
		figure = figures[len(figures)-1] // steal crossed it
	}
	if self >= 0 {
		values["latscope_cpu_cores"] = self
		figures = append(figures, fmt.Sprintf("latscope %.0f%% of a core", 100*self))
	}
	detail := strings.Join(figures, ", ")
	return verdict{cause: event.StallClientHost, label: fmt.Sprintf("client host saturated (%s)", figure),
		evidence: fmt.Sprintf("the client host was short of CPU over it (%s): its own delays are in these gaps, not the server's", detail),
		values:   values}, true
}

// weighted is sum over its weight w; -1 (unknown) without any.
func weighted(sum float64, w time.Duration) float64 {
	if w <= 0 {
		return -1
	}
	return sum / float64(w)
}
