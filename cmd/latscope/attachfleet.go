package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
)

// fleetMerge aggregates every attached agent's requests together: the
// fleet's percentiles come from the agents' events merged into one
// aggregator, never from their own percentiles averaged. Each agent's
// pipeline gets a tap that forwards its requests (and its losses, so the
// fleet counts what it misses); the first session header that arrives
// gives the fleet its objectives (goodput).
//
// The agents' clocks differ, so the fleet's windows and span mix their
// timestamps; its totals and distributions do not depend on them.
type fleetMerge struct {
	events  chan event.Event
	summary chan aggregate.Summary
	session atomic.Bool // the first header has been forwarded
}

// startFleetMerge starts the fleet's aggregator; it runs until finish.
func startFleetMerge() *fleetMerge {
	f := &fleetMerge{events: make(chan event.Event, 4096), summary: make(chan aggregate.Summary, 1)}
	go func() { // owned by the fleetMerge: ends when finish closes events
		agg := aggregate.New(aggregate.Config{})
		for ev := range f.events {
			agg.Add(ev)
		}
		f.summary <- agg.Summary()
	}()
	return f
}

// tap is the consumer that forwards one agent's events to the fleet.
func (f *fleetMerge) tap() consumer { return fleetTap{f} }

// finish returns the fleet's summary, once every tap has ended.
func (f *fleetMerge) finish() aggregate.Summary {
	close(f.events)
	return <-f.summary
}

type fleetTap struct{ f *fleetMerge }

func (t fleetTap) start(_ context.Context, fan *pipeline.Fanout) func() error {
	sub := fan.Subscribe("fleet", 4096, pipeline.Lossless)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range sub.Events() {
			switch {
			case ev.Request != nil, ev.Loss != nil:
			case ev.Session != nil && t.f.session.CompareAndSwap(false, true):
				s := *ev.Session
				s.Name = "fleet"
				ev = event.NewSession(&s)
			default:
				continue
			}
			t.f.events <- ev // the fleet's aggregator always reads
		}
	}()
	return func() error { <-done; return nil }
}

// attachJSON is what attach --no-tui --json prints.
type attachJSON struct {
	Fleet  aggregate.Summary            `json:"fleet"`
	Agents map[string]aggregate.Summary `json:"agents"`
	// Connections says, per agent, where it was and whether it was reached
	// (connections 0: never, and error says why).
	Connections map[string]agentConnection `json:"connections"`
}

type agentConnection struct {
	URL         string `json:"url"`
	Connections int64  `json:"connections"`
	Error       string `json:"error,omitempty"`
}

func writeAttachJSON(w io.Writer, fleet aggregate.Summary, agents []*attached) error {
	out := attachJSON{Fleet: fleet, Agents: map[string]aggregate.Summary{}, Connections: map[string]agentConnection{}}
	for _, a := range agents {
		st := a.client.Status()
		name := st.Name
		// Two agents of the same name (the same host name) both show.
		for n := 2; ; n++ {
			if _, taken := out.Agents[name]; !taken {
				break
			}
			name = fmt.Sprintf("%s#%d", st.Name, n)
		}
		c := agentConnection{URL: a.url, Connections: st.Connections}
		switch {
		case a.err != nil:
			c.Error = a.err.Error()
		case st.Connections == 0:
			c.Error = "never connected: " + lastError(st)
		}
		out.Agents[name], out.Connections[name] = a.summary, c
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the summaries: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
