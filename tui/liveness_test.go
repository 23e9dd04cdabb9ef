package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// liveSession is three agents, east, west and north, and their fleet, for
// secs seconds; the agents of down stop sending after alive seconds and
// are shown lost, as attach shows them.
func liveSession(t *testing.T, secs, alive int, down ...string) *model {
	t.Helper()
	names := []string{"east", "west", "north"}
	agents := map[string]*synth{}
	for _, n := range names {
		agents[n] = newSynth(synthOpts{name: n, perSec: 8})
	}
	all := newSynth(synthOpts{name: "fleet", perSec: 24})
	feed := &stepFeed{}
	m := newModel(feed, Options{Window: 1}, plainRenderer())
	m.Update(sizeMsg(160, 48))
	isDown := func(n string, sec int) bool { return sec >= alive && strings.Contains(strings.Join(down, " "), n) }
	for sec := range secs {
		live := 0
		for _, n := range names {
			if !isDown(n, sec) {
				agents[n].advance(1)
				live++
			}
		}
		if live > 0 { // the fleet's timeline moves with the agents live
			all.advance(1)
		}
		fr := all.frame()
		for _, n := range names {
			af := agents[n].frame()
			af.Agent = &AgentInfo{State: "live", Live: true}
			if isDown(n, sec) {
				af.Agent = &AgentInfo{State: "lost"}
				af.Status = []string{"agent " + n + ": lost: read stream: EOF; retrying in 1s (attempt 2)"}
			}
			fr.Agents = append(fr.Agents, af)
			fr.Status = append(fr.Status, af.Status...)
		}
		text := map[int]string{0: "no agent live", 2: "2 of 3 agents live", 3: "3 agents live"}[live]
		fr.Live = &Liveness{Live: live, Total: 3, Text: text}
		feed.set(fr)
		m.Update(tickMsg{})
	}
	return m
}

func agentRow(view, name string) string {
	for _, l := range strings.Split(view, "\n") {
		if strings.HasPrefix(strings.TrimLeft(l, " ▸"), name+" ") {
			return l
		}
	}
	return ""
}

// One agent of three lost: the header says over how many agents the
// fleet's figures are, and the lost agent's row says lost with no rates.
func TestAnAgentLostIsShownLost(t *testing.T) {
	m := liveSession(t, 30, 20, "west")
	v := ansi.Strip(m.View())
	lines := strings.Split(v, "\n")
	if !strings.Contains(lines[0], "fleet · 2 of 3 agents live") {
		t.Errorf("the header does not say 2 of 3 agents are live: %q", lines[0])
	}
	if strings.Contains(lines[1], "ok 0.0 req/s") {
		t.Errorf("the fleet's rates are zeroed while two agents are live: %q", lines[1])
	}
	west, east := agentRow(v, "west"), agentRow(v, "east")
	if !strings.Contains(west, "lost: read stream: EOF") || !strings.Contains(west, "ok    0.0/s") || !strings.Contains(west, "ttft - ms") {
		t.Errorf("west's row does not say lost with no rates: %q", west)
	}
	if !strings.Contains(east, "streaming") || strings.Contains(east, "ok    0.0/s") {
		t.Errorf("east's row: %q", east)
	}
	press(m, "a", "a") // west
	if top := ansi.Strip(strings.SplitN(m.View(), "\n", 2)[0]); !strings.Contains(top, "agent 2/3 west · lost") || !strings.Contains(top, "lost 0:") {
		t.Errorf("west's own view does not say it is lost: %q", top)
	}
}

// Every agent lost: the header's rates drop to zero, greyed, and its clock
// says why it stopped, instead of showing the last rates as current.
func TestAFleetWithNoAgentLiveDoesNotLookLive(t *testing.T) {
	live := ansi.Strip(liveSession(t, 20, 20).View())
	m := liveSession(t, 30, 20, "east", "west", "north")
	v := ansi.Strip(m.View())
	lines := strings.Split(v, "\n")
	if !strings.Contains(lines[0], "fleet · no agent live") || !strings.Contains(lines[0], "no agent live 0:20") {
		t.Errorf("the header does not say no agent is live: %q", lines[0])
	}
	if !strings.Contains(lines[1], "ok 0.0 req/s   0.0 tok/s") || !strings.Contains(lines[1], "no events arriving") {
		t.Errorf("the rates do not drop to zero: %q", lines[1])
	}
	if lines[1] == strings.Split(live, "\n")[1] {
		t.Errorf("the rates are those of the live fleet: %q", lines[1])
	}
	for _, name := range []string{"east", "west", "north"} {
		if row := agentRow(v, name); !strings.Contains(row, "lost") {
			t.Errorf("%s's row does not say lost: %q", name, row)
		}
	}
}
