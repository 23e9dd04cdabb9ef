package aggregate

import (
	"time"

	"github.com/latscope/latscope/event"
)

// UserSpans is what the server's own spans say of its users' requests in a
// window (latscope watch --otlp-listen): one record per request latscope
// did not send (event.FlagServerReported), the canary's never among them.
// Each figure is the server's for each request, so its quantiles are exact
// (within the histograms' precision), not bucket estimates; milliseconds,
// as Stats are. A phase the spans do not give has Count 0.
type UserSpans struct {
	// Requests counts the users' requests whose span ended in the window.
	Requests int64 `json:"requests"`
	TTFT     Stats `json:"ttft"`
	Queue    Stats `json:"queue"`
	Prefill  Stats `json:"prefill"`
	Decode   Stats `json:"decode"`
	E2E      Stats `json:"e2e"`
	// Shares are the phases' shares of the users' end-to-end time (sums
	// over sums, 0..1): queue, prefill, decode, and the rest; absent
	// without an end-to-end total.
	Shares map[string]float64 `json:"shares,omitempty"`
}

// userSpanState holds the statistics of the users' span records.
type userSpanState struct {
	ttft, queue, prefill, decode, e2e *metric // nil until the first record
}

// userSpanPhases are the server stages of a span record that UserSpans
// keeps, with the phase each is.
var userSpanPhases = []struct {
	stage event.Stage
	phase string
}{{event.StageQueue, PhaseQueue}, {event.StagePrefill, PhasePrefill}, {event.StageDecode, PhaseDecode}}

func (u *userSpanState) metrics() []*metric {
	return []*metric{u.queue, u.prefill, u.decode}
}

// addUserSpan takes one user's span record (event.FlagServerReported),
// which ended at end.
func (a *Aggregator) addUserSpan(r *event.Request, end time.Time) {
	a.see(end)
	u := &a.users
	if u.e2e == nil {
		u.ttft, u.queue, u.prefill, u.decode, u.e2e = newMetric(), newMetric(), newMetric(), newMetric(), newMetric()
	}
	a.recordDur(u.e2e, end, r.E2E)
	if r.TTFT > 0 {
		a.recordDur(u.ttft, end, r.TTFT)
	}
	if r.Server == nil {
		return
	}
	for i, m := range u.metrics() {
		if d, ok := r.Server.Stages[userSpanPhases[i].stage]; ok && d >= 0 {
			a.recordDur(m, end, d)
		}
	}
}

// userSpans returns the users' span statistics in window w; nil without any.
func (a *Aggregator) userSpans(w Window, now time.Time) *UserSpans {
	u := &a.users
	if u.e2e == nil {
		return nil
	}
	out := &UserSpans{
		E2E:  a.mg.stats(u.e2e, w, now),
		TTFT: a.mg.stats(u.ttft, w, now),
	}
	if out.E2E.Count == 0 {
		return nil
	}
	out.Requests = out.E2E.Count
	phases := []*Stats{&out.Queue, &out.Prefill, &out.Decode}
	for i, m := range u.metrics() {
		*phases[i] = a.mg.stats(m, w, now)
	}
	out.Shares = userShares(out, phases)
	return out
}

// userShares are the phases' shares of the users' end-to-end total: each
// phase's sum over the e2e sum, the rest what they leave of it.
func userShares(u *UserSpans, phases []*Stats) map[string]float64 {
	total := u.E2E.Mean * float64(u.E2E.Count)
	if !(total > 0) {
		return nil
	}
	shares := make(map[string]float64, len(phases)+1)
	rest := 1.0
	for i, st := range phases {
		if st.Count == 0 {
			continue
		}
		share := st.Mean * float64(st.Count) / total
		shares[userSpanPhases[i].phase] = share
		rest -= share
	}
	shares[PhaseRest] = rest
	return shares
}

// MemoryBytes of the users' span statistics.
func (u *userSpanState) memory() int {
	if u.e2e == nil {
		return 0
	}
	n := 0
	for _, m := range []*metric{u.ttft, u.queue, u.prefill, u.decode, u.e2e} {
		n += m.memory()
	}
	return n
}
