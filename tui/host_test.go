package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// TestBusyHostWarning: while the client host's latest sample finds it
// busy, the dashboard warns that timings include its delays.
func TestBusyHostWarning(t *testing.T) {
	s := newSynth(synthOpts{})
	s.advance(5)
	psi, steal, self, rq := 0.38, 0.0, 0.07, 9
	s.add(event.NewHost(&event.HostSample{Time: t0.Add(5 * time.Second), Interval: time.Second, Available: true, Cores: 2,
		PSISome: &psi, Steal: &steal, SelfCPU: &self, RunQueue: &rq}))
	m := newModel(StaticFeed(s.frame()), Options{}, plainRenderer())
	m.Update(sizeMsg(200, 40))
	m.Update(tickMsg{})
	press(m, "?")
	want := "the client host is busy, timings include its delays: host: PSI cpu 38% · steal 0% · run queue 9/2 · latscope 7% of a core"
	if v := m.View(); !strings.Contains(v, want) {
		t.Fatalf("no busy-host warning:\n%s", v)
	}
}
