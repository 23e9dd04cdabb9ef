package fleet

import (
	"testing"
	"time"

	"github.com/latscope/latscope/agent"
)

func TestStateOfTellsLostFromNeverReached(t *testing.T) {
	t.Parallel()
	down := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		name string
		st   agent.Status
		want AgentState
	}{
		{"first try", agent.Status{State: agent.Connecting}, Connecting},
		{"retrying, never reached", agent.Status{State: agent.Reconnecting, Attempt: 3}, Connecting},
		{"streaming", agent.Status{State: agent.Streaming, Connections: 1}, Live},
		{"cut, retrying", agent.Status{State: agent.Reconnecting, Connections: 1, DownSince: down}, Lost},
		{"stopped while streaming", agent.Status{State: agent.Stopped, Connections: 2}, Live},
		{"stopped while lost", agent.Status{State: agent.Stopped, Connections: 1, DownSince: down}, Lost},
		{"stopped, never reached", agent.Status{State: agent.Stopped}, Stopped},
		{"given up", agent.Status{State: agent.GaveUp, Err: "not reached in 30s"}, GivenUp},
		{"session over", agent.Status{State: agent.Ended, Connections: 1}, Ended},
		{"token refused", agent.Status{State: agent.Failed}, Failed},
	} {
		if got := StateOf(c.st); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestLivenessCountsTheAgentsLive(t *testing.T) {
	t.Parallel()
	lost := agent.Status{State: agent.Reconnecting, Connections: 1, DownSince: time.Unix(1, 0)}
	live := agent.Status{State: agent.Streaming, Connections: 1}
	for _, c := range []struct {
		sts  []agent.Status
		want string
		n    int
	}{
		{[]agent.Status{live, lost, live}, "2 of 3 agents live", 2},
		{[]agent.Status{live, live}, "2 agents live", 2},
		{[]agent.Status{live}, "1 agent live", 1},
		{[]agent.Status{lost, lost}, "no agent live", 0},
	} {
		l := LivenessOf(c.sts)
		if l.String() != c.want || l.Live != c.n || l.Total != len(c.sts) || len(l.States) != len(c.sts) {
			t.Errorf("%+v: %q (%d of %d), want %q", c.sts, l.String(), l.Live, l.Total, c.want)
		}
	}
}
