package fleet

import (
	"fmt"

	"github.com/latscope/latscope/agent"
)

// AgentState is where an attached agent stands, for every surface that
// shows it (the dashboard's agents table and header, attach --json): the
// client's connection state read with its history, so that an agent whose
// connection ended is told apart from one never reached.
type AgentState string

// The states of an agent.
const (
	// Connecting: not reached yet, still tried.
	Connecting AgentState = "connecting"
	// Live: streaming its events now.
	Live AgentState = "live"
	// Lost: reached, then its connection ended and no other took its place
	// (it is retried: an agent may restart). Its figures stopped when it
	// was lost.
	Lost AgentState = "lost"
	// GivenUp: never reached within attach's --give-up.
	GivenUp AgentState = "given up"
	// Ended: its session finished and it said so.
	Ended AgentState = "ended"
	// Failed: refused for a reason retrying cannot fix (a token, not a
	// latscope agent, a stream that cannot be read).
	Failed AgentState = "failed"
	// Stopped: attach stopped before the agent was reached.
	Stopped AgentState = "stopped"
)

// StateOf derives an agent's state from its client's status. A client
// stopped (attach itself ended) keeps the state it had: live if it was
// streaming, lost if its connection had ended.
func StateOf(st agent.Status) AgentState {
	switch st.State {
	case agent.Streaming:
		return Live
	case agent.Ended:
		return Ended
	case agent.GaveUp:
		return GivenUp
	case agent.Failed:
		return Failed
	}
	switch {
	case st.Connections > 0 && !st.DownSince.IsZero():
		return Lost
	case st.Connections > 0:
		return Live // stopped while it streamed
	case st.State == agent.Stopped:
		return Stopped
	}
	return Connecting
}

// Liveness is how many of the attached agents stream now: the fleet's
// figures are over those (the others' requests stay in its totals, but no
// longer move its rates).
type Liveness struct {
	Live, Total int
	// States holds each agent's state, in the order given.
	States []AgentState
}

// LivenessOf reads the agents' statuses.
func LivenessOf(sts []agent.Status) Liveness {
	out := Liveness{Total: len(sts), States: make([]AgentState, len(sts))}
	for i, st := range sts {
		out.States[i] = StateOf(st)
		if out.States[i] == Live {
			out.Live++
		}
	}
	return out
}

// String says it for a header: "3 agents live", "2 of 3 agents live",
// "no agent live".
func (l Liveness) String() string {
	switch {
	case l.Live == 0:
		return "no agent live"
	case l.Live == l.Total && l.Total == 1:
		return "1 agent live"
	case l.Live == l.Total:
		return fmt.Sprintf("%d agents live", l.Total)
	}
	return fmt.Sprintf("%d of %d agents live", l.Live, l.Total)
}
