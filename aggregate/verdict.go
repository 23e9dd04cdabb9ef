package aggregate

import (
	"fmt"
	"strings"
	"time"

	"github.com/latscope/latscope/event"
)

// ProbeState says whether latscope itself kept pace over the run.
type ProbeState string

// The probe states.
const (
	// ProbeUnknown: nothing shows the probe's pace either way (no probe
	// samples, no measured scheduling lag): a replay of a bare recording.
	ProbeUnknown ProbeState = "unknown"
	// ProbeKeptPace: every piece of evidence says the probe kept pace.
	ProbeKeptPace ProbeState = "kept_pace"
	// ProbePaused: latscope's goroutines ran late over a few shared pauses,
	// too brief a share of the run to be its limit: the requests in those
	// pauses hold its delay, the rest do not. Nothing names the server the
	// limit while this is so.
	ProbePaused ProbeState = "paused"
	// ProbeHeld: latscope's own delay is in the figures: it sent late, said
	// it was the limit, or its pauses took a material share of the run.
	ProbeHeld ProbeState = "held"
	// ProbeHostBusy: latscope ran late, or its streams paused, because the
	// machine it runs on was saturated by other processes (the host
	// collector's PSI cpu pressure or steal) while latscope itself used
	// little CPU: the timings include the host's delays, and neither the
	// server nor latscope is named the limit.
	ProbeHostBusy ProbeState = "host_busy"
)

// starvedHeldShare is the share of the run the probe's own pauses must take
// for it to be the limit: below it, a starved pause or two (a busy host's
// hiccup) marks the requests it touched without recasting the whole run.
const starvedHeldShare = 0.01

// ProbeVerdict is the one judgement of whether latscope, not the server,
// was the limit. Every surface (the dashboard's badge and warning, the
// status line, the limit insight, the summary) shows this value and
// derives nothing of its own, so they cannot disagree. It is whole-run:
// once the probe was held, the run's figures hold its delay; and once it
// paused, no surface names the server the limit.
//
// Its evidence:
//   - the scheduling lag, only where the load model measures it (open loop
//     and trace: a closed loop sends when a slot frees, so its lag is 0 by
//     construction and says nothing): p99 at or past event.ProbeLagLimit
//     over at least insightMinRequests requests;
//   - the stall detector's probe-starved pauses (the same tally as the
//     stall insights): any one means latscope's goroutines ran late, and
//     their shared time at starvedHeldShare of the run or more makes it
//     the limit;
//   - the probe's own word: samples flagged Limited (its CPU, or its
//     open-loop lag over its recent window) and probe_limit markers.
type ProbeVerdict struct {
	State ProbeState `json:"state"`
	// Reason says what the state rests on, with its figures.
	Reason string `json:"reason"`

	// LagMeasured is set when the load model measures scheduling lag;
	// LagP99MS and LagRequests are the run's, then.
	LagMeasured bool    `json:"lag_measured"`
	LagP99MS    float64 `json:"sched_lag_p99_ms,omitempty"`
	LagRequests int64   `json:"sched_lag_requests,omitempty"`
	// StarvedStalls is the stall markers whose cause is probe_starved, and
	// StarvedPauses, StarvedMS the pauses they hold and their shared time.
	StarvedStalls int64   `json:"starved_stalls"`
	StarvedPauses int64   `json:"starved_pauses"`
	StarvedMS     float64 `json:"starved_ms"`
	// StarvedShare is StarvedMS over the run's elapsed time (0 when either
	// is unknown).
	StarvedShare float64 `json:"starved_share"`
	// LimitedSamples counts the probe samples that said the probe was the
	// limit, LimitMarkers its probe_limit markers.
	LimitedSamples int64 `json:"limited_samples"`
	LimitMarkers   int64 `json:"limit_markers"`
	// CPUPercent is the probe's latest CPU use (100 = one core); negative
	// when unknown.
	CPUPercent float64 `json:"cpu_pct"`
}

// Held reports whether the probe was the limit at some point of the run.
func (v ProbeVerdict) Held() bool { return v.State == ProbeHeld }

// Badge is the verdict in one word or mark, for a header or status line.
func (v ProbeVerdict) Badge() string {
	switch v.State {
	case ProbeHeld:
		return "LATSCOPE IS THE LIMIT"
	case ProbePaused:
		return "latscope paused"
	case ProbeHostBusy:
		return "client host saturated"
	case ProbeKeptPace:
		return "kept pace"
	}
	return "pace unknown"
}

// probeEvidence is what the aggregator keeps of the probe's own word.
type probeEvidence struct {
	samples        int64 // probe samples seen
	limitedSamples int64
	limitMarkers   int64
	lastLimit      string // the latest Limited reason or probe_limit message
}

func (p *probeEvidence) addSample(s *event.ProbeSample) {
	p.samples++
	if s.Limited {
		p.limitedSamples++
		if s.Reason != "" {
			p.lastLimit = s.Reason
		}
	}
}

func (p *probeEvidence) addMarker(m *event.Marker) {
	if m.Kind != event.MarkerProbeLimit {
		return
	}
	p.limitMarkers++
	if m.Message != "" {
		p.lastLimit = m.Message
	}
}

// lagMeasured reports whether the run's load model measures scheduling
// lag: open loop and trace replay send on a schedule; a closed loop does
// not. Without a session header, an offered rate says open loop, and so
// does a probe sample with lag samples (the probe times only scheduled
// sends).
func (a *Aggregator) lagMeasured() bool {
	if a.session == nil {
		return a.cfg.OfferedRate > 0 || a.probe != nil && a.probe.LagSamples > 0
	}
	l := a.session.Load
	return l.Mode == "open" || l.Mode == "trace" || l.Rate > 0
}

// verdict judges the probe from the run's evidence.
func (a *Aggregator) verdict(run WindowStats, elapsed time.Duration) ProbeVerdict {
	v := ProbeVerdict{
		LagMeasured: a.lagMeasured(), CPUPercent: -1,
		LimitedSamples: a.probeEv.limitedSamples, LimitMarkers: a.probeEv.limitMarkers,
	}
	if a.probe != nil {
		v.CPUPercent = a.probe.CPUPercent
	}
	starved := a.stalls[event.StallProbeStarved]
	if starved != nil {
		v.StarvedStalls, v.StarvedPauses, v.StarvedMS = starved.Markers, starved.Pauses, starved.PausedMS
		if elapsed > 0 {
			v.StarvedShare = v.StarvedMS / (float64(elapsed) / float64(time.Millisecond))
		}
	}
	limitMS := float64(event.ProbeLagLimit) / float64(time.Millisecond)
	lagEnough := v.LagMeasured && run.SchedLag.Count >= insightMinRequests
	if lagEnough {
		v.LagP99MS, v.LagRequests = run.SchedLag.P99, run.SchedLag.Count
	}

	held := a.heldReasons(v, starved, limitMS, lagEnough)
	late := held
	if v.StarvedStalls > 0 && len(held) == 0 {
		late = []string{fmt.Sprintf("the streams' %s %s latscope's: its goroutines ran late", starved.Text(), starved.were())}
	}
	if hv, ok := a.hostVerdict(v, a.host.stats(), late); ok {
		return hv
	}
	if len(held) > 0 {
		v.State, v.Reason = ProbeHeld, strings.Join(held, "; ")
		return v
	}

	if v.StarvedStalls > 0 {
		v.State = ProbePaused
		v.Reason = fmt.Sprintf("the streams' %s %s its own: its goroutines ran late", starved.Text(), starved.were())
		if v.StarvedShare > 0 {
			v.Reason += fmt.Sprintf(", %s of the run (the limit is %s)", sharePct(v.StarvedShare), sharePct(starvedHeldShare))
		}
		return v
	}
	if !lagEnough && a.probeEv.samples == 0 {
		v.State, v.Reason = ProbeUnknown, "no probe samples and no measured scheduling lag"
		return v
	}
	var kept []string
	switch {
	case lagEnough:
		kept = append(kept, fmt.Sprintf("sched-lag p99 %.2f ms (limit %.0f ms)", v.LagP99MS, limitMS))
	case v.LagMeasured:
		kept = append(kept, "too few sends to judge its lag")
	default:
		kept = append(kept, "lag not measured in this load model")
	}
	kept = append(kept, "no shared pause of its own")
	if a.probeEv.samples > 0 {
		kept = append(kept, "never flagged itself")
	}
	v.State, v.Reason = ProbeKeptPace, strings.Join(kept, ", ")
	return v
}

// heldReasons lists what says the probe was the limit: its sends' lag,
// its own share of the streams' pauses, its own word.
func (a *Aggregator) heldReasons(v ProbeVerdict, starved *StallTotal, limitMS float64, lagEnough bool) []string {
	var held []string
	if lagEnough && v.LagP99MS >= limitMS {
		held = append(held, fmt.Sprintf("it sent requests up to %.2f ms late (scheduling-lag p99 over %d requests, limit %.0f ms)",
			v.LagP99MS, v.LagRequests, limitMS))
	}
	if v.StarvedStalls > 0 && v.StarvedShare >= starvedHeldShare {
		held = append(held, fmt.Sprintf("the streams' %s %s its own, %s of the run: its goroutines ran late",
			starved.Text(), starved.were(), sharePct(v.StarvedShare)))
	}
	if n := v.LimitedSamples + v.LimitMarkers; n > 0 {
		held = append(held, fmt.Sprintf("it reported itself the limit %s (latest: %s)", count(n, "time", "times"), a.probeEv.lastLimit))
	}
	return held
}

// count says n with its noun: "1 time", "3 times"; with empty nouns, n alone.
func count(n int64, one, many string) string {
	switch {
	case one == "":
		return fmt.Sprint(n)
	case n == 1:
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// VerdictText is the verdict as one line: its badge and its reason.
func (v ProbeVerdict) VerdictText() string {
	switch v.State {
	case ProbeHeld:
		return "LATSCOPE IS THE LIMIT: " + v.Reason + ": latencies include latscope's own delay"
	case ProbePaused:
		return "latscope paused: " + v.Reason + ": the requests in those pauses include latscope's own delay"
	case ProbeHostBusy:
		return v.Reason
	case ProbeKeptPace:
		return "latscope kept pace: " + v.Reason
	}
	return "latscope's pace unknown: " + v.Reason
}

// sharePct says a share of the run as a percentage, with the precision a
// small share needs: "0.04%", "1.2%", "35%".
func sharePct(x float64) string {
	p := 100 * x
	switch {
	case p < 0.1:
		return fmt.Sprintf("%.2f%%", p)
	case p < 10:
		return fmt.Sprintf("%.1f%%", p)
	}
	return fmt.Sprintf("%.0f%%", p)
}
