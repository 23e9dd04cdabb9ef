package sweep

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// Result is a sweep: its steps and what they say about the server.
type Result struct {
	Mode Mode `json:"mode"`
	// Arrival is the open-loop arrival process (constant, poisson, gamma)
	// as the session header gives it: constant arrivals find the server's
	// capacity, Poisson ones the load it takes under bursts.
	Arrival string `json:"arrival,omitempty"`
	SLO     string `json:"slo,omitempty"` // the objectives, as written
	Steps   []Step `json:"steps"`         // in the order they ran

	// MaxLoad is the highest load that passed (met the SLO, or without one
	// ran without saturating) with every lower load passing too: the load
	// the server can take. Knee is the lowest load at which queue wait
	// became the largest stage of TTFT, where the server's queue gauge (if
	// read) showed requests waiting; a knee above MaxLoad says why in its
	// Why. Saturation is the step with the highest throughput. Each is nil
	// when no step qualifies.
	MaxLoad    *Finding `json:"max_load"`
	Knee       *Finding `json:"knee"`
	Saturation *Finding `json:"saturation"`

	// Stopped says why the sweep ended; Interrupted is set when it was
	// stopped (Ctrl-C) rather than finished.
	Stopped     string `json:"stopped"`
	Interrupted bool   `json:"interrupted,omitempty"`
	// Failure names the step that had no successful request and why
	// ("step 2 (4 req/s): no request succeeded: connection refused by
	// ..."): the sweep could not measure the server and ended there.
	Failure string `json:"failure,omitempty"`
	// Notes explain a missing finding or a caveat, in words.
	Notes []string `json:"notes,omitempty"`
}

// Finding names one step and says why it was picked.
type Finding struct {
	Step       int     `json:"step"` // the step's Index
	Load       Load    `json:"load"`
	Throughput float64 `json:"ok_per_s"`
	TokPerSec  float64 `json:"tok_per_s"`
	Why        string  `json:"why"`
}

// NewResult draws the findings from steps (in the order they ran) checked
// against objectives.
func NewResult(steps []Step, objectives []aggregate.Objective) Result {
	r := Result{Steps: slices.Clone(steps), SLO: sloText(objectives)}
	if len(steps) > 0 {
		r.Mode = steps[0].Load.Mode
	}
	if f := firstFailed(r.Steps); f != nil {
		r.Failure = failure(f)
	}
	if len(steps) > 0 && !r.anySuccess() {
		// Nothing was measured: a max load, knee or saturation would be
		// read off zeros.
		r.Notes = append(r.Notes, NoSuccessNote)
		return r
	}
	r.MaxLoad = r.maxLoad(len(objectives) > 0)
	r.Knee = r.knee()
	r.Saturation = r.saturation()
	return r
}

// NoSuccessNote is the note, and what the table says in place of the
// findings, when no step had a successful request.
const NoSuccessNote = "no step had a successful request"

// anySuccess reports whether a step that ran to its end measured a
// successful request.
func (r *Result) anySuccess() bool {
	for i := range r.Steps {
		if !r.Steps[i].Interrupted && r.Steps[i].MeasuredSuccess() {
			return true
		}
	}
	return false
}

func sloText(objectives []aggregate.Objective) string {
	parts := make([]string, 0, len(objectives))
	for _, o := range objectives {
		parts = append(parts, o.String())
	}
	return strings.Join(parts, ",")
}

func finding(s *Step, why string) *Finding {
	return &Finding{Step: s.Index, Load: s.Load, Throughput: s.Throughput, TokPerSec: s.TokPerSec, Why: why}
}

func (r *Result) maxLoad(withSLO bool) *Finding {
	best, fail := boundary(r.Steps)
	if best < 0 {
		switch {
		case len(r.Steps) == 0:
		case withSLO:
			r.Notes = append(r.Notes, "no load met the SLO with every lower load meeting it too: start the sweep lower")
		default:
			r.Notes = append(r.Notes, "no load ran without saturating the server: start the sweep lower")
		}
		return nil
	}
	s := &r.Steps[best]
	why := "the highest load that ran without saturating the server"
	if withSLO {
		why = "the highest load that met " + r.SLO
	}
	switch {
	case fail >= 0 && r.Steps[fail].Failed != "":
		// It did not fail on its load: it measured nothing.
		why += fmt.Sprintf(" (%s at step %d had no successful request)", r.Steps[fail].Load, r.Steps[fail].Index)
	case fail >= 0:
		why += fmt.Sprintf(" (%s at step %d did not)", r.Steps[fail].Load, r.Steps[fail].Index)
	}
	if r.Failure != "" {
		why += "; a lower bound: the sweep failed before it found the limit"
	}
	return finding(s, why)
}

// byLoad returns the indices of the steps that were not interrupted, by
// load, lowest first (ties in the order they ran).
func (r *Result) byLoad() []int {
	var idx []int
	for i := range r.Steps {
		if !r.Steps[i].Interrupted {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(r.Steps[a].Load.Value, r.Steps[b].Load.Value) })
	return idx
}

// knee is the lowest load, among the steps that measured the server, at
// which queue wait was the largest stage of TTFT with evidence that
// requests queued: where the server's queue gauge was read, it showed
// requests waiting (a mean depth above zero); a queue share where the
// gauge stayed at zero names nothing that queued, and is no knee. A knee
// above the max load says why it is there: its step did not pass, so the
// server ran out of room (saturated, missed the SLO) before queue wait led.
func (r *Result) knee() *Finding {
	seen := false
	var unbacked *Step // the lowest queue-led step whose gauge showed no request waiting
	for _, i := range r.byLoad() {
		s := &r.Steps[i]
		if !s.HasBreakdown || s.Failed != "" || !s.MeasuredSuccess() {
			continue
		}
		seen = true
		if s.LargestStage != event.StageQueue {
			continue
		}
		if s.HasQueueDepth && !(s.QueueDepth > 0) {
			if unbacked == nil {
				unbacked = s
			}
			continue
		}
		return finding(s, r.kneeWhy(s))
	}
	if unbacked != nil {
		r.Notes = append(r.Notes, fmt.Sprintf("no knee: queue wait was the largest stage of TTFT at %s (step %d, %.0f%% of the mean), but the server's queue gauge showed no request waiting there: nothing queued", unbacked.Load, unbacked.Index, 100*unbacked.QueueShare))
		return nil
	}
	switch {
	case len(r.Steps) == 0:
	case !seen:
		r.Notes = append(r.Notes, "no knee: no step had a TTFT breakdown (it needs the server's per-request timings or metrics)")
	case r.serverWaitLargest():
		// The wait was there, but nothing showed it was a queue.
		r.Notes = append(r.Notes, "no knee: queue wait never became the largest stage of TTFT; the server wait (front end and queue, not told apart) did, but no queue gauge reading showed requests waiting")
	default:
		r.Notes = append(r.Notes, "no knee: queue wait never became the largest stage of TTFT")
	}
	return nil
}

// kneeWhy says why s is the knee: the queue's share, the gauge's depth
// that backs it, and, when s lies above the max load, why it does.
func (r *Result) kneeWhy(s *Step) string {
	why := fmt.Sprintf("the lowest load where queue wait is the largest stage of TTFT (%.0f%% of the mean", 100*s.QueueShare)
	if s.HasQueueDepth {
		why += fmt.Sprintf("; mean queue depth %.1f", s.QueueDepth)
	}
	why += ")"
	if r.MaxLoad != nil && s.Load.Value > r.MaxLoad.Load.Value {
		why += fmt.Sprintf("; above the max load (%s): this step's verdict was %s, so the server ran out of room before queue wait led", r.MaxLoad.Load, s.Verdict())
	}
	return why
}

// serverWaitLargest reports whether the server wait was the largest stage
// of any step's TTFT.
func (r *Result) serverWaitLargest() bool {
	return slices.ContainsFunc(r.Steps, func(s Step) bool { return s.HasBreakdown && s.LargestStage == event.StageServerWait })
}

func (r *Result) saturation() *Finding {
	top := -1
	for _, i := range r.byLoad() {
		if !r.Steps[i].MeasuredSuccess() {
			continue // its throughput of 0 measured nothing: no finding
		}
		if top < 0 || r.Steps[i].Throughput > r.Steps[top].Throughput {
			top = i
		}
	}
	if top < 0 {
		return nil
	}
	for _, s := range r.Steps {
		if s.Saturated {
			return finding(&r.Steps[top], fmt.Sprintf("the highest throughput; step %d saturated the server", s.Index))
		}
	}
	if r.Failure != "" {
		return finding(&r.Steps[top], "the highest throughput seen before the sweep failed")
	}
	r.Notes = append(r.Notes, "no step saturated the server: its capacity may be higher than the saturation throughput shown")
	return finding(&r.Steps[top], "the highest throughput seen (the server did not saturate)")
}

// Step returns the step with the given Index, or nil.
func (r *Result) Step(index int) *Step {
	for i := range r.Steps {
		if r.Steps[i].Index == index {
			return &r.Steps[i]
		}
	}
	return nil
}

// CurvePoint is one step on the throughput–latency curve. Latencies are in
// milliseconds.
type CurvePoint struct {
	Step       int     `json:"step"`
	Load       Load    `json:"load"`
	Throughput float64 `json:"ok_per_s"`
	TokPerSec  float64 `json:"tok_per_s"`
	// Latencies are null where the step measured none.
	TTFTP50   *float64 `json:"ttft_p50"`
	TTFTP99   *float64 `json:"ttft_p99"`
	ITLP99    *float64 `json:"itl_p99"`
	TPOTP50   *float64 `json:"tpot_p50"`
	Pass      bool     `json:"pass"`
	Saturated bool     `json:"saturated"`
}

// Curve returns throughput against latency, one point per step that was
// not interrupted, by load.
func (r Result) Curve() []CurvePoint {
	var out []CurvePoint
	for _, i := range r.byLoad() {
		s := &r.Steps[i]
		out = append(out, CurvePoint{
			Step: s.Index, Load: s.Load, Throughput: s.Throughput, TokPerSec: s.TokPerSec,
			TTFTP50: stat(s.TTFT, s.TTFT.P50), TTFTP99: stat(s.TTFT, s.TTFT.P99),
			ITLP99: stat(s.ITL, s.ITL.P99), TPOTP50: stat(s.TPOT, s.TPOT.P50),
			Pass: s.Pass, Saturated: s.Saturated,
		})
	}
	return out
}

// stat returns v, one of st's figures, or nil when st measured nothing.
func stat(st aggregate.Stats, v float64) *float64 {
	if st.Count == 0 {
		return nil
	}
	return &v
}

// NoneSucceeded reports whether no step measured a successful request:
// every request of the sweep failed.
func (r *Result) NoneSucceeded() bool { return !r.anySuccess() }
