package aggregate

import (
	"time"

	"github.com/latscope/latscope/event"
)

// base is the start of every synthetic run: a whole 10 s boundary, so slot
// edges in tests fall on round offsets.
func base() time.Time { return time.Date(2026, 3, 4, 5, 6, 0, 0, time.UTC) }

// okReq builds a successful request intended at `at`, whose first content
// chunk arrives after ttft and each next one itl later.
func okReq(at time.Time, ttft, itl time.Duration, chunks int) *event.Request {
	r := &event.Request{
		ID: "r", Dialect: "openai-chat", Intended: at, Start: at, Outcome: event.OutcomeOK,
		TTFT: ttft, OutputTokens: chunks,
	}
	for i := 0; i < chunks; i++ {
		r.Chunks = append(r.Chunks, event.Chunk{At: ttft + time.Duration(i)*itl, Tokens: 1})
	}
	r.E2E = ttft
	if chunks > 1 {
		r.E2E = ttft + time.Duration(chunks-1)*itl
	}
	return r
}

func errReq(at time.Time, outcome event.Outcome, status int) *event.Request {
	return &event.Request{ID: "e", Intended: at, Start: at, Outcome: outcome, Status: status, E2E: 5 * time.Millisecond}
}

func ptr(f float64) *float64 { return &f }

func addAll(a *Aggregator, reqs ...*event.Request) {
	for _, r := range reqs {
		a.Add(event.NewRequest(r))
	}
}
