package aggregate

import (
	"fmt"
	"strings"

	"github.com/latscope/latscope/aggregate/internal/stall"
	"github.com/latscope/latscope/event"
)

// HostStats is the client host's CPU pressure over the run, from the host
// collector's samples (event.HostSample): the machine latscope runs on,
// whose delays are in every timing it takes. Shares are 0..1; a figure
// the host never gave is -1.
type HostStats struct {
	// Latest is the latest sample (nil before the first).
	Latest *event.HostSample `json:"latest,omitempty"`
	// Samples counts the samples that carried a figure; BusySamples those
	// in which the host was saturated (PSI cpu some or steal at its
	// threshold, stall.HostPSIBusy and stall.HostStealBusy).
	Samples     int64 `json:"samples"`
	BusySamples int64 `json:"busy_samples"`
	// PSIMean and PSIMax are PSI cpu some over the samples; BusyPSIMean
	// over the busy ones.
	PSIMean     float64 `json:"psi_cpu_some_mean"`
	PSIMax      float64 `json:"psi_cpu_some_max"`
	BusyPSIMean float64 `json:"busy_psi_cpu_some_mean"`
	StealMean   float64 `json:"steal_mean"`
	StealMax    float64 `json:"steal_max"`
	// RunQueueMax is the most runnable tasks a sample saw, on Cores CPUs.
	RunQueueMax int `json:"run_queue_max"`
	Cores       int `json:"cores"`
	// SelfCPUMean is latscope's own CPU use, in cores, over the samples.
	SelfCPUMean float64 `json:"latscope_cpu_cores_mean"`
	// BusyAtStart is set when the run's first sample found the host
	// saturated already: timings include its delays from the start.
	BusyAtStart bool `json:"busy_at_start"`
}

// hostState accumulates the host samples.
type hostState struct {
	latest                 *event.HostSample
	samples, busy          int64
	psiN, stealN, selfN    int64
	psiSum, busyPSI, psiMx float64
	stealSum, stealMx      float64
	selfSum                float64
	runQueueMax, cores     int
	busyAtStart, started   bool
}

// hostPressure is a sample's PSI cpu some: over its interval, or the
// kernel's 10-second average in a first sample; false when it has none.
func hostPressure(h *event.HostSample) (float64, bool) {
	switch {
	case h.PSISome != nil:
		return *h.PSISome, true
	case h.PSISomeAvg10 != nil:
		return *h.PSISomeAvg10, true
	}
	return 0, false
}

// hostBusy reports whether h says the host was saturated.
func hostBusy(h *event.HostSample) bool {
	psi, ok := hostPressure(h)
	return ok && psi >= stall.HostPSIBusy || h.Steal != nil && *h.Steal >= stall.HostStealBusy
}

// add takes one sample; it returns the marker a run that starts on an
// already busy host gets, at the first sample with a figure.
func (h *hostState) add(s *event.HostSample) *event.Marker {
	h.latest = s
	psi, havePSI := hostPressure(s)
	if !s.Available || !havePSI && s.Steal == nil {
		return nil
	}
	h.samples++
	busy := hostBusy(s)
	if busy {
		h.busy++
	}
	if havePSI {
		h.psiN++
		h.psiSum += psi
		h.psiMx = max(h.psiMx, psi)
		if busy {
			h.busyPSI += psi
		}
	}
	if s.Steal != nil {
		h.stealN++
		h.stealSum += *s.Steal
		h.stealMx = max(h.stealMx, *s.Steal)
	}
	if s.SelfCPU != nil {
		h.selfN++
		h.selfSum += *s.SelfCPU
	}
	if s.RunQueue != nil {
		h.runQueueMax = max(h.runQueueMax, *s.RunQueue)
	}
	h.cores = max(h.cores, s.Cores)
	if h.started {
		return nil
	}
	h.started = true
	if !busy {
		return nil
	}
	h.busyAtStart = true
	return &event.Marker{Time: s.Time, Kind: event.MarkerNote, Source: "aggregate.host",
		Message: "the client host is busy: timings will include its delays (" + hostFigures(s) + ")",
		Values:  map[string]float64{"host_psi_cpu_some": psi}}
}

// stats returns the run's figures.
func (h *hostState) stats() HostStats {
	mean := func(sum float64, n int64) float64 {
		if n == 0 {
			return -1
		}
		return sum / float64(n)
	}
	out := HostStats{
		Latest: h.latest, Samples: h.samples, BusySamples: h.busy,
		PSIMean: mean(h.psiSum, h.psiN), PSIMax: -1, BusyPSIMean: -1,
		StealMean: mean(h.stealSum, h.stealN), StealMax: -1,
		RunQueueMax: h.runQueueMax, Cores: h.cores,
		SelfCPUMean: mean(h.selfSum, h.selfN), BusyAtStart: h.busyAtStart,
	}
	if h.psiN > 0 {
		out.PSIMax = h.psiMx
	}
	if h.stealN > 0 {
		out.StealMax = h.stealMx
	}
	if h.busy > 0 && h.psiN > 0 {
		out.BusyPSIMean = h.busyPSI / float64(h.busy)
	}
	return out
}

// hostSaturatedShare is the share of the run's host samples that must be
// busy for the run's timings to hold the host's delays, when no pause was
// named the host's.
const hostSaturatedShare = 0.1

// Saturated reports whether the host was saturated over a material part of
// the run (hostSaturatedShare of its samples).
func (h HostStats) Saturated() bool {
	return h.Samples > 0 && float64(h.BusySamples) >= hostSaturatedShare*float64(h.Samples)
}

// busyFigure names the figure that says the host was saturated: "PSI cpu
// some 38%" (the mean over its busy samples), or its steal.
func (h HostStats) busyFigure() string {
	if h.BusyPSIMean >= stall.HostPSIBusy {
		return fmt.Sprintf("PSI cpu some %.0f%%", 100*h.BusyPSIMean)
	}
	if h.StealMax >= stall.HostStealBusy {
		return fmt.Sprintf("steal up to %.0f%%", 100*h.StealMax)
	}
	return fmt.Sprintf("PSI cpu some up to %.0f%%", 100*max(h.PSIMax, 0))
}

// Line is the run's host line: "host: PSI cpu 38% · steal 0% · run queue
// 9/2 · latscope 7% of a core" (means over the run; the run queue its
// most); "" without samples.
func (h HostStats) Line() string {
	if h.Samples == 0 {
		if h.Latest != nil && !h.Latest.Available {
			return "host: " + h.Latest.Reason
		}
		return ""
	}
	return "host: " + joinHost(h.PSIMean, h.StealMean, h.RunQueueMax, h.Cores, h.SelfCPUMean) +
		fmt.Sprintf(" (means of %d samples, %d of them busy; the run queue at its most)", h.Samples, h.BusySamples)
}

// LatestLine is the latest sample's host line, for a status line; "" when
// there is none with a figure.
func (h HostStats) LatestLine() string {
	if h.Latest == nil || !h.Latest.Available {
		return ""
	}
	return "host: " + hostFigures(h.Latest)
}

// HostBusyNow reports whether the host's latest sample finds it busy.
func HostBusyNow(h HostStats) bool { return h.Latest != nil && hostBusy(h.Latest) }

// hostFigures says one sample's figures.
func hostFigures(s *event.HostSample) string {
	psi, ok := hostPressure(s)
	if !ok {
		psi = -1
	}
	steal, self, rq := -1.0, -1.0, -1
	if s.Steal != nil {
		steal = *s.Steal
	}
	if s.SelfCPU != nil {
		self = *s.SelfCPU
	}
	if s.RunQueue != nil {
		rq = *s.RunQueue
	}
	return joinHost(psi, steal, rq, s.Cores, self)
}

// joinHost joins the figures known (a negative one is not).
func joinHost(psi, steal float64, runQueue, cores int, self float64) string {
	var parts []string
	if psi >= 0 {
		parts = append(parts, fmt.Sprintf("PSI cpu %.0f%%", 100*psi))
	}
	if steal >= 0 {
		parts = append(parts, fmt.Sprintf("steal %.0f%%", 100*steal))
	}
	if runQueue >= 0 && cores > 0 {
		parts = append(parts, fmt.Sprintf("run queue %d/%d", runQueue, cores))
	}
	if self >= 0 {
		parts = append(parts, fmt.Sprintf("latscope %.0f%% of a core", 100*self))
	}
	if len(parts) == 0 {
		return "no figures"
	}
	return strings.Join(parts, " · ")
}

// selfCores is latscope's own CPU use in cores: the host samples' mean,
// else the probe's latest; -1 when unknown.
func (a *Aggregator) selfCores(h HostStats) float64 {
	switch {
	case h.SelfCPUMean >= 0:
		return h.SelfCPUMean
	case a.probe != nil && a.probe.CPUPercent >= 0:
		return a.probe.CPUPercent / 100
	}
	return -1
}

// hostVerdict returns the verdict naming the client host, when the host
// explains latscope's lateness: it was saturated (over a material part of
// the run, or in a pause the stall detector named its own) while
// latscope itself used under stall.HostSelfMax of a core, and something
// shows lateness (late: the probe's own evidence, or the host's pauses).
func (a *Aggregator) hostVerdict(v ProbeVerdict, h HostStats, late []string) (ProbeVerdict, bool) {
	hostStalls := a.stalls[event.StallClientHost]
	if hostStalls != nil {
		late = append(late, "the streams' "+hostStalls.Text()+" "+hostStalls.were()+" the host's")
	}
	self := a.selfCores(h)
	if len(late) == 0 || !h.Saturated() && hostStalls == nil || self >= stall.HostSelfMax {
		return v, false
	}
	v.State = ProbeHostBusy
	v.Reason = fmt.Sprintf("the client host is saturated (%s): timings include its delays", h.busyFigure())
	if self >= 0 {
		v.Reason += fmt.Sprintf("; latscope itself used %.0f%% of a core", 100*self)
	}
	v.Reason += "; " + strings.Join(late, "; ")
	return v, true
}
