package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/latscope/latscope/agent"

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
// The agents' clocks differ: each tap estimates its agent's offset from the
// local clock (NTP-style pings, agent.EstimateClockOffset) when the agent's
// first event arrives and moves the agent's requests by it, so the fleet's
// timeline is this machine's. Its totals and distributions do not depend
// on the clocks at all.
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
func (f *fleetMerge) tap(a *attached) consumer { return fleetTap{f: f, agent: a} }

// finish returns the fleet's summary, once every tap has ended.
func (f *fleetMerge) finish() aggregate.Summary {
	close(f.events)
	return <-f.summary
}

type fleetTap struct {
	f     *fleetMerge
	agent *attached
}

func (t fleetTap) start(ctx context.Context, fan *pipeline.Fanout) func() error {
	sub := fan.Subscribe("fleet", 4096, pipeline.Lossless)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var offset time.Duration
		for ev := range sub.Events() {
			if t.agent.clock == nil {
				// The agent answers (its first event came): how far is its
				// clock from ours, to put its events on the fleet's timeline.
				offset = t.agent.estimateClock(ctx)
			}
			switch {
			case ev.Request != nil:
				r := *ev.Request
				r.Start, r.Intended = r.Start.Add(-offset), r.Intended.Add(-offset)
				ev = event.NewRequest(&r)
			case ev.Loss != nil:
			case ev.Session != nil && t.f.session.CompareAndSwap(false, true):
				s := *ev.Session
				s.Name, s.Time = "fleet", s.Time.Add(-offset)
				ev = event.NewSession(&s)
			default:
				continue
			}
			t.f.events <- ev // the fleet's aggregator always reads
		}
	}()
	return func() error { <-done; return nil }
}

// clockPings is how many times attach pings an agent's clock; the ping
// with the shortest round trip gives the offset.
const clockPings = 8

// clockEstimateLimit bounds the pings of one agent's clock, all together.
const clockEstimateLimit = 5 * time.Second

// clockWarnAbove is the clock offset attach warns about: more than NTP
// keeps hosts apart, enough to move an agent's events on the fleet's
// timeline visibly.
const clockWarnAbove = 50 * time.Millisecond

// estimateClock estimates the agent's clock offset once, says it, and
// returns it (0 when it cannot be estimated; the fleet's timeline then
// takes the agent's timestamps as they are, and says so).
func (a *attached) estimateClock(ctx context.Context) time.Duration {
	// The tap's context outlives Ctrl-C (it drains), so the estimate has a
	// deadline of its own; meanwhile this agent's events wait.
	ctx, cancel := context.WithTimeout(ctx, clockEstimateLimit)
	defer cancel()
	off, err := a.client.EstimateClockOffset(ctx, clockPings, nil)
	a.clock = &clockEstimate{offset: off, err: err}
	switch {
	case err != nil:
		fmt.Fprintf(a.out, "clock offset unknown (%v): its events are on the fleet's timeline as the agent dated them\n", err)
		return 0
	case off.Offset.Abs() > clockWarnAbove:
		fmt.Fprintf(a.out, "warning: its clock is %s from this machine's (±%s, over %d pings): its events are moved by that on the fleet's timeline; check its NTP\n",
			signed(off.Offset), off.Bound().Round(time.Microsecond), off.Samples)
	default:
		fmt.Fprintf(a.out, "clock %s from this machine's (±%s, over %d pings)\n", signed(off.Offset), off.Bound().Round(time.Microsecond), off.Samples)
	}
	return off.Offset
}

// clockEstimate is an agent's clock offset, or why there is none.
type clockEstimate struct {
	offset agent.ClockOffset
	err    error
}

func signed(d time.Duration) string {
	d = d.Round(10 * time.Microsecond)
	if d >= 0 {
		return "+" + d.String()
	}
	return d.String()
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
	// ClockOffsetMS is the agent's clock minus this machine's, by which its
	// events were moved on the fleet's timeline; ClockBoundMS is the most
	// it can be off by (half the round trip of the ping it came from).
	ClockOffsetMS *float64 `json:"clock_offset_ms,omitempty"`
	ClockBoundMS  *float64 `json:"clock_bound_ms,omitempty"`
	ClockError    string   `json:"clock_error,omitempty"`
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
		if a.clock != nil && a.clock.err == nil {
			off, bound := ms(a.clock.offset.Offset), ms(a.clock.offset.Bound())
			c.ClockOffsetMS, c.ClockBoundMS = &off, &bound
		} else if a.clock != nil {
			c.ClockError = a.clock.err.Error()
		}
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

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
