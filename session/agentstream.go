package session

import (
	"context"

	"github.com/latscope/latscope/agent"
	"github.com/latscope/latscope/pipeline"
)

// AgentStream feeds the agent's replay ring. Publishing never waits on a
// client, so the subscription can be lossless: the ring itself decides what
// a slow client misses, and tells it.
type AgentStream struct{ Server *agent.Server }

func (a AgentStream) Start(_ context.Context, fan *pipeline.Fanout) func() error {
	sub := fan.Subscribe("agent", 8192, pipeline.Lossless)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Server.Consume(sub.Events())
	}()
	return func() error { <-done; return nil }
}
