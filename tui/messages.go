package tui

import (
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// renderEvery is the render tick: at most 10 frames a second, whatever the
// event rate.
const renderEvery = 100 * time.Millisecond

// waitLongest bounds a wait for a feed's change: with nothing new (a
// finished run) the screen still looks once a second, and the waiting
// goroutine ends within a second of the program's.
const waitLongest = time.Second

// tickMsg asks the model to read the feed's newest frame; at is when it
// was sent (zero for the first).
type tickMsg struct{ at time.Time }

func tick(every time.Duration) tea.Cmd {
	return tea.Tick(every, func(at time.Time) tea.Msg { return tickMsg{at: at} })
}

// waitChange wakes the model when changed receives, or after waitLongest.
func waitChange(changed <-chan struct{}) tea.Cmd {
	return func() tea.Msg {
		t := time.NewTimer(waitLongest)
		defer t.Stop()
		select {
		case <-changed:
		case <-t.C:
		}
		return tickMsg{at: time.Now()}
	}
}
