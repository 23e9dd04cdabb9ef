package attribute

import (
	"strings"
	"time"

	"github.com/latscope/latscope/event"
)

// userSpanSource is the Source of the stages a user's record takes from
// its span (the span's own timing keeps its collector's Source).
const userSpanSource = "otlp span"

// noteUnjoined remembers, in a watch, the keys of a request of latscope's
// released without its span, so that the span, coming later, is not taken
// for a user's.
func (a *Attributor) noteUnjoined(st *attributorState, h *heldRequest) {
	if a.cfg.UserSpans {
		st.unjoined.put(h.keys, &event.ServerTiming{}, a.cfg.Now())
	}
}

// userSpan is a span that joined none of latscope's requests, waiting
// until its deadline for one to claim it before it becomes a user's record.
type userSpan struct {
	sp       *event.Span
	stored   *storedTiming // its entry in the span store; claimed once a request took it
	deadline time.Time
}

// holdUser keeps sp until UserSpanWait has passed; with MaxSpans waiting
// already, the oldest goes out at once.
func (a *Attributor) holdUser(st *attributorState, ready []event.Event, sp *event.Span, stored *storedTiming) []event.Event {
	if len(st.users) >= a.cfg.MaxSpans {
		old := st.users[0]
		st.users[0] = nil
		st.users = st.users[1:]
		ready = a.releaseUser(st, ready, old)
	}
	st.users = append(st.users, &userSpan{sp: sp, stored: stored, deadline: a.cfg.Now().Add(a.cfg.UserSpanWait)})
	return ready
}

// releaseUsers lets the waiting spans past their deadline (all of them
// when force is set) go out as users' records, unless a request of
// latscope's claimed them meanwhile.
func (a *Attributor) releaseUsers(st *attributorState, ready []event.Event, now time.Time, force bool) []event.Event {
	n := 0
	for _, u := range st.users {
		if !force && now.Before(u.deadline) {
			break
		}
		ready = a.releaseUser(st, ready, u)
		n++
	}
	if n > 0 {
		clear(st.users[:n])
		st.users = st.users[n:]
		if len(st.users) == 0 {
			st.users = nil // let the backing array go
		}
	}
	return ready
}

func (a *Attributor) releaseUser(st *attributorState, ready []event.Event, u *userSpan) []event.Event {
	if u.stored != nil && u.stored.claimed {
		return ready
	}
	return a.emitUser(ready, u.sp)
}

// emitUser appends sp's record as a user's request.
func (a *Attributor) emitUser(ready []event.Event, sp *event.Span) []event.Event {
	r := userRecord(sp)
	if r == nil {
		return ready
	}
	a.users.Add(1)
	return append(ready, event.NewRequest(r))
}

// userRecord makes one of the server's users' requests from its span: the
// server's times only, flagged event.FlagServerReported. It ends when the
// span says it ended (by the server's clock, within a second after it was
// received; when it was received otherwise) and began its end-to-end time
// before. Its TTFT is the server's (vLLM: arrival to first token), split
// into the front end (the TTFT less queue and prefill, the server's time
// before its queue), queue and prefill when the span gives all three and
// they fit; its E2E is the server's. nil when the span has neither an
// end-to-end time nor any stage.
func userRecord(sp *event.Span) *event.Request {
	t := cloneTiming(&sp.Timing)
	e2e, ttft := t.Stages[event.StageServerE2E], t.Stages[event.StageServerTTFT]
	if e2e <= 0 {
		for _, d := range t.Stages {
			e2e += max(d, 0)
		}
	}
	if e2e <= 0 {
		return nil
	}
	end := sp.Time.Round(0)
	if !sp.End.IsZero() && !sp.End.After(end.Add(time.Second)) && sp.End.After(end.Add(-DefaultSpanTTL)) {
		end = sp.End.Round(0)
	}
	id := sp.RequestID
	if id == "" {
		id = "trace-" + sp.TraceID
	}
	start := end.Add(-e2e)
	r := &event.Request{
		ID: id, TraceID: strings.ToLower(sp.TraceID), Intended: start, Start: start,
		PromptTokens: t.PromptTokens, OutputTokens: t.OutputTokens,
		TTFT: ttft, E2E: e2e, Outcome: event.OutcomeOK,
		Flags:  []event.Flag{event.FlagServerReported},
		Server: t,
	}
	r.Breakdown = userBreakdown(t, ttft)
	return r
}

// userBreakdown splits the server's TTFT into its front end, queue and
// prefill; nil unless the span gives all three and they fit within it.
func userBreakdown(t *event.ServerTiming, ttft time.Duration) []event.StageTiming {
	queue, okQ := t.Stages[event.StageQueue]
	prefill, okP := t.Stages[event.StagePrefill]
	front := ttft - queue - prefill
	if !okQ || !okP || ttft <= 0 || queue < 0 || prefill < 0 || front < 0 {
		return nil
	}
	return []event.StageTiming{
		{Stage: event.StageUnattributed, Duration: front, Provenance: event.ServerReported, Source: userSpanSource + ": ttft − queue − prefill"},
		{Stage: event.StageQueue, Duration: queue, Provenance: event.ServerReported, Source: userSpanSource},
		{Stage: event.StagePrefill, Duration: prefill, Provenance: event.ServerReported, Source: userSpanSource},
	}
}
