package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// fleetFeed is two agents, east and west, and their fleet (for the screen
// any aggregate will do: cmd/latscope tests that the fleet's is exact).
func fleetSession(t *testing.T, secs, w, h int) (*model, *stepFeed) {
	t.Helper()
	east, west := newSynth(synthOpts{name: "east", perSec: 8}), newSynth(synthOpts{name: "west", perSec: 12})
	all := newSynth(synthOpts{name: "fleet", perSec: 20})
	// The fleet's sample holds the agents' requests moved onto its
	// timeline, as attach's does: east's clock is 250 ms ahead.
	all.samples = aggregate.New(aggregate.Config{})
	offsets := map[*synth]time.Duration{east: 250 * time.Millisecond, west: 0}
	for _, a := range []*synth{east, west} {
		a.emit = func(ev event.Event) {
			a.add(ev)
			if ev.Request != nil {
				r := *ev.Request
				r.Start, r.Intended = r.Start.Add(-offsets[a]), r.Intended.Add(-offsets[a])
				all.samples.Add(event.NewRequest(&r))
			}
		}
	}
	feed := &stepFeed{}
	m := newModel(feed, Options{Window: 1}, plainRenderer())
	m.Update(sizeMsg(w, h))
	for range secs {
		east.advance(1)
		west.advance(1)
		all.advance(1)
		fr := all.frame()
		e, wf := east.frame(), west.frame()
		e.Agent = &AgentInfo{Region: "us-east-1", ClockKnown: true, ClockOffset: 250 * time.Millisecond, ClockBound: 80 * time.Microsecond}
		wf.Agent = &AgentInfo{} // its clock was not estimated yet
		wf.Status = []string{"agent west: reconnecting (attempt 2)"}
		fr.Agents = []Frame{e, wf}
		fr.Status = wf.Status
		feed.set(fr)
		m.Update(tickMsg{})
	}
	return m, feed
}

// The header names what is shown; a cycles the fleet and each agent; the
// main view has a line per agent with its load, rates, TTFT and health.
func TestSeveralAgents(t *testing.T) {
	m, _ := fleetSession(t, 30, 160, 48)
	v := ansi.Strip(m.View())
	lines := strings.Split(v, "\n")
	if !strings.Contains(lines[0], "fleet · 2 agents") {
		t.Fatalf("the header does not say it shows the fleet: %q", lines[0])
	}
	var east, west string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "  east "):
			east = l
		case strings.HasPrefix(l, "  west "):
			west = l
		}
	}
	for name, l := range map[string]string{"east": east, "west": west} {
		for _, want := range []string{"closed loop c=16", "ok ", "ttft ", "err ", map[string]string{"east": "+250.0ms", "west": "clock ?"}[name]} {
			if !strings.Contains(l, want) {
				t.Errorf("%s's line lacks %q: %q", name, want, l)
			}
		}
	}
	if !strings.Contains(east, " us-east-1 ") || strings.Contains(west, "us-east") {
		t.Errorf("region: east %q, west %q", east, west)
	}
	if !strings.Contains(east, "streaming") || !strings.Contains(west, "reconnecting") {
		t.Errorf("health: east %q, west %q", east, west)
	}
	press(m, "a")
	if top := ansi.Strip(strings.SplitN(m.View(), "\n", 2)[0]); !strings.Contains(top, "agent 1/2 east") {
		t.Fatalf("after a: %q, want agent 1/2 east", top)
	}
	if got := m.frame.Snapshot.Session.Name; got != "east" {
		t.Fatalf("after a the screen shows %q's numbers", got)
	}
	press(m, "a")
	if got := m.frame.Snapshot.Session.Name; got != "west" {
		t.Fatalf("after a, a: %q", got)
	}
	// The requests filter's @agent keeps one agent's requests.
	press(m, "a", "tab", "/")
	for _, r := range "@east" {
		m.Update(keyMsg(string(r)))
	}
	press(m, "enter")
	if len(m.list.rows) == 0 {
		t.Fatal("@east kept no request")
	}
	agents := agentsOf(&m.full)
	for _, r := range m.list.rows {
		if agents.of(r) != "east" {
			t.Fatalf("@east kept %s of %q", r.ID, agents.of(r))
		}
	}
	press(m, "/", "esc", "esc", "a")
	if got := m.frame.Snapshot.Session.Name; got != "east" {
		t.Fatalf("a cycles back through the fleet to east: %q", got)
	}
}

func TestGoldenFleet(t *testing.T) {
	for _, size := range goldenSizes {
		w, h := size[0], size[1]
		m, _ := fleetSession(t, 60, w, h)
		t.Run(fmt.Sprintf("fleet_%dx%d", w, h), func(t *testing.T) { golden.RequireEqual(t, m.View()) })
	}
}
