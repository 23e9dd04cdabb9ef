package aggregate

import (
	"slices"
	"time"

	"github.com/latscope/latscope/aggregate/internal/stall"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/internal/nagle"
)

// ProbeJudge derives, from one probe's raw stream, what the probe only
// measured: the pauses its streams shared and their causes (stall
// markers), its scheduling lag's quantiles and whether it was the limit
// (its samples' SchedLagP99, LagSamples, Limited and Reason, and
// probe_limit markers), and whether a request's Nagle suspicion stands
// (it does not where the gaps it rests on fell in a pause other streams
// shared). It is a pure function of the stream: a live run, a replay of
// its recording and an attached view of its agent derive the same.
//
// A stream is raw when its probe samples say event.ProbeRawV1; the probe
// sends one before its first request. Any other stream passes unchanged: a
// recording made before, whose probe judged itself and sent its own stall
// and probe_limit markers, keeps exactly those (nothing is derived again,
// so no pause is counted twice), and so does a stream without a probe. A
// raw stream carries no stall marker of the probe's own.
//
// The Aggregator runs one on its events; the fleet runs one per agent and
// a sweep one per step, and hand on what it returns, which is judged: an
// aggregator that takes it derives nothing again. Not safe for concurrent
// use.
type ProbeJudge struct {
	mode   judgeMode
	stalls *stall.Detector // made with the first raw sample
	self   SelfJudge
	// early holds the client host's pressure sampled before the first
	// probe sample, for the detector once it is made.
	early []stall.HostPressure
	// server is the session's server, as far as its design is known: it
	// decides which signatures are evidence of a stall's cause.
	server stall.Server
}

// maxEarlyHost bounds the host samples kept before the probe's first: a
// stream of host samples without a probe keeps only its latest few.
const maxEarlyHost = 8

// SelfJudge judges a probe's raw samples alone (event.ProbeRawV1): its
// scheduling lag's quantiles over the recent window, and whether it was
// the limit (its CPU, its lag), with a probe_limit marker per reason at
// most every 10 s. ProbeJudge holds one; a consumer that shows only the
// samples (the agent's /metrics) uses one alone. Not safe for concurrent
// use.
type SelfJudge struct {
	lags     lagWindow
	limits   probeLimits
	gate     markerGate
	openLoop bool // the stream has carried send lags: the probe sends on a schedule
}

// NewSelfJudge returns a judge of one probe's samples.
func NewSelfJudge() *SelfJudge {
	lim := defaultProbeLimits()
	return &SelfJudge{limits: lim, gate: newMarkerGate(lim.Cooldown)}
}

type judgeMode int

const (
	judgeUnknown judgeMode = iota // no probe sample yet
	judgeRaw                      // the probe left its judgement to us
	judgeNone                     // the stream came judged
)

// NewProbeJudge returns a judge for one probe's stream.
func NewProbeJudge() *ProbeJudge {
	return &ProbeJudge{self: *NewSelfJudge()}
}

// Add takes the stream's next event. It returns the event as judged (a
// copy where the judgement changed it) and the markers derived now.
func (j *ProbeJudge) Add(ev event.Event) (judged event.Event, derived []event.Marker) {
	if ev.Session != nil {
		j.server = designOf(ev.Session.Server).stallServer()
		if j.stalls != nil {
			j.stalls.SetServer(j.server)
		}
	}
	if ev.Probe != nil && j.mode == judgeUnknown {
		j.mode = judgeNone
		if ev.Probe.Raw >= event.ProbeRawV1 {
			j.mode = judgeRaw
			j.stalls = stall.New(stall.Config{Server: j.server})
			for _, p := range j.early {
				j.stalls.Host(p)
			}
		}
		j.early = nil
	}
	if ev.Host != nil {
		j.host(ev.Host)
		return ev, nil
	}
	if j.mode != judgeRaw {
		return ev, nil
	}
	switch {
	case ev.Probe != nil && ev.Probe.Raw >= event.ProbeRawV1:
		p, markers := j.sample(ev.Probe)
		return event.NewProbe(p), markers
	case ev.Request != nil:
		markers := j.stalls.Add(ev.Request)
		if r := j.nagle(ev.Request); r != ev.Request {
			ev = event.NewRequest(r)
		}
		return ev, markers
	}
	return ev, nil
}

// host gives the client host's pressure to the stall detector: pauses in
// an interval of a saturated host are the host's (stall.HostPressure).
func (j *ProbeJudge) host(h *event.HostSample) {
	p, ok := stall.HostPressureOf(h)
	switch {
	case !ok:
	case j.mode == judgeRaw:
		j.stalls.Host(p)
	case j.mode == judgeUnknown:
		if len(j.early) == maxEarlyHost {
			j.early = j.early[1:]
		}
		j.early = append(j.early, p)
	}
}

// Flush returns the stalls still pending: the stream ended.
func (j *ProbeJudge) Flush() []event.Marker {
	if j.stalls == nil {
		return nil
	}
	return j.stalls.Flush()
}

// sample takes a raw probe sample's evidence and returns the sample as
// judged, with the markers derived at its time.
func (j *ProbeJudge) sample(p *event.ProbeSample) (*event.ProbeSample, []event.Marker) {
	j.stalls.SetMaxInFlight(p.MaxInFlight)
	for _, s := range p.Sent {
		j.stalls.Sent(s.ID, s.At)
	}
	for _, l := range p.Late {
		j.stalls.Starved(l.From, l.To)
	}
	out, limits := j.self.Judge(p)
	return out, append(j.stalls.Advance(p.Time), limits...)
}

// Judge returns p as judged (a copy without its raw evidence, with its
// scheduling lag's quantiles, and Limited and Reason when the probe was
// the limit), and the probe_limit markers due at its time. A sample that
// is not raw is returned as it is.
func (j *SelfJudge) Judge(p *event.ProbeSample) (*event.ProbeSample, []event.Marker) {
	if p.Raw < event.ProbeRawV1 {
		return p, nil
	}
	now := p.Time.Round(0) // wall clock only, as a recording has it
	for _, l := range p.SendLags {
		j.lags.add(now.Add(l.At), l.Lag)
		j.openLoop = true
	}
	self := probeSelf{CPUPercent: p.CPUPercent, CPUPercentAll: hostShare(p.CPUPercent, p.Cores), Cores: p.Cores}
	self.SchedLagP50, self.SchedLagP99, self.LagSamples = j.lags.quantiles(now, j.limits.LagWindow)
	findings := probeLimitFindings(p.Time, self, j.openLoop, j.limits)

	out := *p
	out.Raw, out.SendLags, out.Late, out.Sent = 0, nil, nil, nil
	out.SchedLagP99, out.LagSamples = self.SchedLagP99, self.LagSamples
	if len(findings) > 0 {
		out.Limited, out.Reason = true, findings[0].marker.Message
	}
	var markers []event.Marker
	for _, f := range findings {
		if j.gate.allow(f.reason, now) {
			markers = append(markers, f.marker)
		}
	}
	return &out, markers
}

// nagle returns r, or a copy without its Nagle suspicion where that rests
// on gaps other streams paused in too: a pause of the whole server is not
// this connection's delayed ACK.
func (j *ProbeJudge) nagle(r *event.Request) *event.Request {
	if !r.HasFlag(event.FlagNagleSuspect) {
		return r
	}
	id, start := stall.StreamID(r), r.Start
	shared := func(from, to time.Duration) bool {
		return j.stalls.SharedPause(id, start.Add(from), start.Add(to))
	}
	if nagle.Signature(r.Chunks, shared) {
		return r
	}
	c := *r
	c.Flags = slices.DeleteFunc(slices.Clone(r.Flags), func(f event.Flag) bool { return f == event.FlagNagleSuspect })
	return &c
}
