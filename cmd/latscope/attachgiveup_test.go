package main

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/agent"
	"github.com/latscope/latscope/session"
)

// An attach whose only agent is never reached gives up after --give-up by
// itself (no Ctrl-C) and exits 1 with the reason: the last dial error.
func TestAttachGivesUpAnAgentNeverReached(t *testing.T) {
	t.Parallel()
	refused := refusedAddr(t)
	never := func(string) bool { return false } // attach ends by itself
	stdout, stderr, err := attachUntil(t, never, "--no-tui", "--give-up", "300ms", "http://"+refused)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitFailure {
		t.Fatalf("err = %v, want exit %d\nstderr:\n%s", err, exitFailure, stderr)
	}
	for _, want := range []string{refused, "not reached in 300ms", "connection refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not say %q", err, want)
		}
	}
	if !hasLine(stderr, refused+": ", "gave up: not reached in 300ms: cannot reach") {
		t.Errorf("stderr does not say it gave up:\n%s", stderr)
	}
	if !strings.Contains(stdout, "never connected: not reached in 300ms") {
		t.Errorf("the summary does not say why:\n%s", stdout)
	}
}

// An agent given up while another was reached is no failure: the attach
// ends with the other's session and its JSON marks each agent's state.
func TestAttachShowsAnAgentGivenUpBesideOneReached(t *testing.T) {
	t.Parallel()
	srv := fakeAgent(t) // "east": one session, then the end
	refused := refusedAddr(t)
	never := func(string) bool { return false }
	out, stderr, err := attachUntil(t, never, "--no-tui", "--json", "--give-up", "200ms", srv.URL, "http://"+refused)
	if err != nil {
		t.Fatalf("attach: %v, want success: one agent was reached\n%s", err, stderr)
	}
	got := attachStates(t, out)
	if got.Connections["east"].State != "ended" || got.Connections[refused].State != "given up" || got.LiveAgents != 0 {
		t.Errorf("states %+v, live %d: want east ended, %s given up, none live", got.Connections, got.LiveAgents, refused)
	}
	if !slices.Equal(got.FleetAgents, []string{"east"}) {
		t.Errorf("fleet_agents %v, want the agent reached", got.FleetAgents)
	}
}

type attachStatesJSON struct {
	Connections map[string]session.AgentConnection
	FleetAgents []string `json:"fleet_agents"`
	LiveAgents  int      `json:"live_agents"`
}

func attachStates(t *testing.T, out string) attachStatesJSON {
	t.Helper()
	var got attachStatesJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out)
	}
	return got
}

// liveAgent is a real agent streaming one session that has not ended; kill
// stops it as a crash would: its streams end without the end frame and
// nothing listens any more.
func liveAgent(t *testing.T, name string) (url string, kill func()) {
	t.Helper()
	_, url, kill = servedAgent(t, agent.Config{Identity: agent.Identity{Name: name}}, name, "closed", time.Now(), 5)
	return url, kill
}

// killOneOfThree attaches to three live agents, east, west and north,
// kills west once all three are connected, and stops attach (Ctrl-C) once
// it said west lost; took is the time between the kill and that line.
func killOneOfThree(t *testing.T, args ...string) (stdout, stderr string, took time.Duration) {
	t.Helper()
	names := []string{"east", "west", "north"}
	urls := make([]string, len(names))
	kills := map[string]func(){}
	for i, name := range names {
		urls[i], kills[name] = liveAgent(t, name)
	}
	var killedAt time.Time
	lost := func(stderr string) bool {
		if killedAt.IsZero() {
			for _, name := range names { // each connected: its clock was estimated
				if !hasLine(stderr, name+": ", "clock ") {
					return false
				}
			}
			killedAt = time.Now()
			kills["west"]()
		}
		if hasLine(stderr, "west: ", "lost: ") {
			took = time.Since(killedAt)
			return true
		}
		return false
	}
	stdout, stderr, err := attachUntil(t, lost, append(append([]string{"--no-tui", "--token", "tok-0123456789abcdef"}, args...), urls...)...)
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, stderr)
	}
	return stdout, stderr, took
}

// Three agents streaming; one dies: attach says it is lost at once (on
// stderr) and, stopped, its JSON marks it lost and the other two live.
func TestAttachShowsAnAgentKilledAsLost(t *testing.T) {
	t.Parallel()
	out, stderr, _ := killOneOfThree(t, "--json")
	got := attachStates(t, out)
	for name, want := range map[string]string{"east": "live", "west": "lost", "north": "live"} {
		if c := got.Connections[name]; c.State != want || c.Connections != 1 {
			t.Errorf("agent %s: state %q, %d connections: want %s after one connection\n%s", name, c.State, c.Connections, want, stderr)
		}
	}
	if got.LiveAgents != 2 || len(got.FleetAgents) != 3 {
		t.Errorf("live_agents %d, fleet_agents %v: want 2 live of the 3 merged", got.LiveAgents, got.FleetAgents)
	}
}

// The summary's fleet says over which agents it is, and how many were live.
func TestAttachSummarySaysOverWhichAgentsTheFleetIs(t *testing.T) {
	t.Parallel()
	out, _, _ := killOneOfThree(t)
	if want := "== fleet: 3 agents' requests merged (east, west, north); 2 of 3 agents live at the end"; !strings.Contains(out, want) {
		t.Errorf("the summary does not say %q:\n%s", want, out)
	}
}
