package session

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/latscope/latscope/agent"
	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/fleet"
	"github.com/latscope/latscope/tui"
)

// The fleet: every attached agent's requests merged into one aggregator
// (fleet.Fleet), never their percentiles averaged, on this machine's
// clock. The dashboard's fleet view, --json's "fleet" and the final
// summary's all read that one merger.
//
// The agents' clocks differ: each client estimates its agent's offset from
// the local clock (NTP-style pings) at the start of every connection,
// before that connection's events, and the fleet moves the agent's events
// by it. Totals and distributions do not depend on the clocks at all.

// clockPings is how many times attach pings an agent's clock at each
// connection; the ping with the shortest round trip gives the offset.
const clockPings = 8

// clockWarnAbove is the clock offset attach warns about: more than NTP
// keeps hosts apart, enough to move an agent's events on the fleet's
// timeline visibly.
const clockWarnAbove = 50 * time.Millisecond

// sayClock says an agent's new clock estimate on w (headless attach).
func sayClock(w io.Writer, st agent.Status) {
	off := st.Clock
	switch {
	case st.ClockErr != "" && st.ClockKnown:
		fmt.Fprintf(w, "clock offset not estimated again (%s): its events stay moved by the last estimate, %s\n", st.ClockErr, signed(off.Offset))
	case st.ClockErr != "":
		fmt.Fprintf(w, "clock offset unknown (%s): its events are on the fleet's timeline as the agent dated them\n", st.ClockErr)
	case off.Offset.Abs() > clockWarnAbove:
		fmt.Fprintf(w, "warning: its clock is %s from this machine's (±%s, over %d pings): its events are moved by that on the fleet's timeline; check its NTP\n",
			signed(off.Offset), off.Bound().Round(time.Microsecond), off.Samples)
	default:
		fmt.Fprintf(w, "clock %s from this machine's (±%s, over %d pings)\n", signed(off.Offset), off.Bound().Round(time.Microsecond), off.Samples)
	}
}

// agentInfo is what the dashboard's agents table shows of an agent beside
// its events.
func agentInfo(st agent.Status) *tui.AgentInfo {
	state := fleet.StateOf(st)
	return &tui.AgentInfo{Region: st.Region, State: string(state), Live: state == fleet.Live,
		ClockKnown: st.ClockKnown, ClockOffset: st.Clock.Offset, ClockBound: st.Clock.Bound()}
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
	// Connections says, per agent, where it was, where it measures from,
	// its clock, whether it was reached (connections 0: never, and error
	// says why) and its state when attach ended.
	Connections map[string]AgentConnection `json:"connections"`
	// FleetAgents names the agents whose requests the fleet merges (those
	// reached); LiveAgents counts those still streaming when attach ended.
	FleetAgents []string `json:"fleet_agents"`
	LiveAgents  int      `json:"live_agents"`
}

// AgentConnection is what attach --json says of one agent's connection.
type AgentConnection struct {
	URL string `json:"url"`
	// State is fleet.AgentState: live, lost (reached, then its connection
	// ended and was not back), given up (never reached within --give-up),
	// ended, failed, stopped or connecting.
	State       string `json:"state"`
	Region      string `json:"region,omitempty"` // the agent's --region
	Shard       string `json:"shard,omitempty"`  // the agent's --shard
	Connections int64  `json:"connections"`
	Error       string `json:"error,omitempty"`
	// ClockOffsetMS is the agent's clock minus this machine's, by which its
	// events were moved on the fleet's timeline, as last estimated (once a
	// connection: ClockEstimates); ClockBoundMS is the most it can be off by
	// (half the round trip of the ping it came from).
	ClockOffsetMS  *float64 `json:"clock_offset_ms,omitempty"`
	ClockBoundMS   *float64 `json:"clock_bound_ms,omitempty"`
	ClockEstimates int      `json:"clock_estimates"`
	ClockError     string   `json:"clock_error,omitempty"`
}

func writeAttachJSON(w io.Writer, merged aggregate.Summary, agents []*attached) error {
	out := attachJSON{Fleet: merged, Agents: map[string]aggregate.Summary{}, Connections: map[string]AgentConnection{}, FleetAgents: []string{}}
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
		state := fleet.StateOf(st)
		if state == fleet.Live {
			out.LiveAgents++
		}
		if st.Connections > 0 {
			out.FleetAgents = append(out.FleetAgents, name)
		}
		c := AgentConnection{URL: a.url, State: string(state), Region: st.Region, Shard: st.Shard, Connections: st.Connections,
			ClockEstimates: st.ClockEstimates, ClockError: st.ClockErr}
		if st.ClockKnown {
			off, bound := ms(st.Clock.Offset), ms(st.Clock.Bound())
			c.ClockOffsetMS, c.ClockBoundMS = &off, &bound
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

// fleetView is the dashboard's fleet view: the one merger attach feeds
// (fleet.Fleet, which --json and the final summary read too), whose
// snapshot holds the requests sample of its timeline.
type fleetView struct {
	merged *fleet.Fleet
}

// newFleetView returns the merger.
func newFleetView() *fleetView {
	return &fleetView{merged: fleet.New(fleet.Config{})}
}

// frame is the fleet's frame, and a version that moves with every event
// the fleet takes.
func (v *fleetView) frame() (tui.Frame, uint64) {
	snap, version := v.merged.Snapshot()
	return tui.Frame{Snapshot: snap}, version
}
