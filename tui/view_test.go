package tui

import (
	"fmt"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"
)

// goldenSizes are the sizes every view is checked at: the smallest
// supported terminal, two common ones and a large one.
var goldenSizes = [][2]int{{80, 24}, {120, 40}, {160, 48}, {200, 50}}

// The main, requests, waterfall and help views, a replay and a finished
// run, at every golden size, from the synthetic session.
func TestGolden(t *testing.T) {
	for _, size := range goldenSizes {
		w, h := size[0], size[1]
		name := fmt.Sprintf("%dx%d", w, h)
		m, s, feed := session(t, synthOpts{}, Options{Window: 1, Objectives: testSLO}, 150, w, h)
		t.Run("main_"+name, func(t *testing.T) { golden.RequireEqual(t, m.View()) })
		press(m, "tab")
		t.Run("requests_"+name, func(t *testing.T) { golden.RequireEqual(t, m.View()) })
		press(m, "down", "down", "down", "enter") // a request that succeeded, with every stage
		t.Run("waterfall_"+name, func(t *testing.T) { golden.RequireEqual(t, m.View()) })
		press(m, "esc", "esc", "?")
		t.Run("help_"+name, func(t *testing.T) { golden.RequireEqual(t, m.View()) })
		press(m, "?")

		fr := s.frame()
		fr.Finished = true
		feed.set(fr)
		m.Update(tickMsg{})
		t.Run("finished_"+name, func(t *testing.T) { golden.RequireEqual(t, m.View()) })

		rf := &replayFeed{}
		r := newModel(rf, Options{Window: 1, Objectives: testSLO}, plainRenderer())
		r.Update(sizeMsg(w, h))
		fr = s.frame()
		fr.Playback = &Playback{Position: 150 * time.Second, Length: 10 * time.Minute, Speed: 10}
		rf.set(fr)
		r.Update(tickMsg{})
		press(r, " ")
		t.Run("replay_"+name, func(t *testing.T) { golden.RequireEqual(t, r.View()) })
	}
}

// The main view at 120×40 as shown in the package documentation.
func TestCapture120x40(t *testing.T) {
	m, _, _ := session(t, synthOpts{}, Options{Window: 1, Objectives: testSLO}, 150, 120, 40)
	golden.RequireEqual(t, m.View())
}

// The conversations view (key c) at every golden size: five-turn chats
// whose prefix cache starts evicting at second 90, so the hit rate falls
// and TTFT rises on the sparklines; and the view before any turn.
func TestConversationsGolden(t *testing.T) {
	for _, size := range goldenSizes {
		w, h := size[0], size[1]
		name := fmt.Sprintf("%dx%d", w, h)
		m, _, _ := session(t, synthOpts{conversation: true}, Options{Window: 1, Objectives: testSLO}, 150, w, h)
		press(m, "c")
		t.Run("conversations_"+name, func(t *testing.T) { golden.RequireEqual(t, m.View()) })
		press(m, "c")
		if m.screen != screenMain {
			t.Fatalf("c again: screen %d, want the main one", m.screen)
		}
	}
	m, _, _ := session(t, synthOpts{}, Options{Window: 1, Objectives: testSLO}, 5, 80, 24)
	press(m, "c")
	t.Run("conversations_none", func(t *testing.T) { golden.RequireEqual(t, m.View()) })
}
