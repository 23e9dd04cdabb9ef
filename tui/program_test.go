package tui

import (
	"bytes"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"
)

// The whole program, headless: start, wait for the bar, press keys, quit.
// The final View is compared, never the raw byte stream, whose frames
// depend on timing.
func TestProgram(t *testing.T) {
	s := newSynth(synthOpts{})
	s.advance(60)
	m := newModel(StaticFeed(s.frame()), Options{Objectives: testSLO}, plainRenderer())
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(120, 40))
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("TTFT breakdown")) },
		teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(20*time.Millisecond))
	for _, k := range []string{"w", "s", "s", "s"} {
		tm.Send(keyMsg(k))
	}
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")})
	fm := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second))
	golden.RequireEqual(t, []byte(fm.View()))
}
