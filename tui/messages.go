package tui

import (
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// renderEvery is the render tick: at most 10 frames a second, whatever the
// event rate.
const renderEvery = 100 * time.Millisecond

// tickMsg asks the model to read the feed's newest frame.
type tickMsg struct{}

func tick(every time.Duration) tea.Cmd {
	return tea.Tick(every, func(time.Time) tea.Msg { return tickMsg{} })
}
