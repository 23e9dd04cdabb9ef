package probe

import (
	"context"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

func BenchmarkPromptNext8192(b *testing.B) {
	ps, err := NewPromptSource(b.Context(), PromptConfig{PromptTokens: Length{Mean: 8192}, OutputTokens: Length{Mean: 128}, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		ps.Next(uint64(i))
	}
}

// instantLoadDoer answers at once: what is left is the Runner's own cost.
type instantLoadDoer struct{}

func (instantLoadDoer) Do(_ context.Context, spec RequestSpec) *event.Request {
	now := time.Now()
	return &event.Request{ID: spec.ID, Seq: spec.Seq, Start: now, Intended: now, Outcome: event.OutcomeOK}
}

func BenchmarkRunnerPerRequest(b *testing.B) {
	ps, err := NewPromptSource(b.Context(), PromptConfig{PromptTokens: Length{Mean: 512}, OutputTokens: Length{Mean: 128}, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	r, err := NewRunner(instantLoadDoer{}, LoadConfig{Concurrency: 8, Requests: b.N}, ps)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	if err := r.Run(b.Context(), func(event.Event) {}); err != nil {
		b.Fatal(err)
	}
}
