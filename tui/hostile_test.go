package tui

import (
	"strings"
	"testing"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/internal/textsafe"
	"github.com/latscope/latscope/internal/textsafe/hostile"
)

// A session whose every outside text (its name, the model, the requests'
// errors, markers, an agent's region and status) is hostile, made safe as
// the pipeline makes every source's events: the rendered view, without
// colour, holds no character a terminal acts on, and shows the text escaped,
// on the main view and the requests view.
func TestHostileFieldsRenderEscaped(t *testing.T) {
	bad := hostile.Joined()
	s := newSynth(synthOpts{name: textsafe.Line(bad), perSec: 20})
	add := s.emit
	s.emit = func(ev event.Event) {
		switch {
		case ev.Request != nil:
			r := *ev.Request
			r.Model = bad
			if !r.OK() {
				r.Error = bad
			}
			ev = event.NewRequest(&r)
		case ev.Marker != nil:
			mk := *ev.Marker
			mk.Message, mk.Source = bad, bad
			ev = event.NewMarker(&mk)
		}
		add(event.Safe(ev))
	}
	feed := &stepFeed{}
	m := newModel(feed, Options{}, plainRenderer())
	m.Update(sizeMsg(200, 50))
	for range 40 {
		s.advance(1)
		fr := s.frame()
		agent := fr
		agent.Agent = &AgentInfo{Region: textsafe.Line(bad)}
		fr.Agents = []Frame{agent, agent}
		fr.Status = []string{textsafe.Line("agent " + bad + ": reconnecting")}
		feed.set(fr)
		m.Update(tickMsg{})
	}
	for _, keys := range [][]string{nil, {"a"}, {"tab"}} {
		press(m, keys...)
		v := m.View()
		if i := textsafe.IndexUnsafe(v); i >= 0 {
			t.Errorf("after %v: raw %q at byte %d of the view", keys, v[i:min(i+12, len(v))], i)
		}
		if !strings.Contains(v, hostile.Word) || !strings.Contains(v, `\x1b`) {
			t.Errorf("after %v: the hostile text is not shown escaped:\n%s", keys, v)
		}
	}
}
