package tui

import (
	"io"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// Offscreen is the dashboard without a terminal: the same model, fed by
// the same feed, at a fixed size, its frames rendered on demand. The soak
// bench uses it to measure what the dashboard holds over a long run.
type Offscreen struct{ m *model }

// NewOffscreen returns a width×height colour dashboard reading feed.
func NewOffscreen(feed Feed, opts Options, width, height int) *Offscreen {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.TrueColor) // render the colours a terminal would get
	m := newModel(feed, opts, r)
	m.Update(tea.WindowSizeMsg{Width: width, Height: height})
	return &Offscreen{m: m}
}

// Frame takes the feed's newest frame, as the dashboard's tick does, and
// returns the screen.
func (o *Offscreen) Frame() string {
	o.m.Update(tickMsg{})
	return o.m.View()
}

// ToggleView switches between the main screen and the requests list, as
// tab does.
func (o *Offscreen) ToggleView() { o.m.Update(tea.KeyMsg{Type: tea.KeyTab}) }

// Open opens the selected request's waterfall, as enter does.
func (o *Offscreen) Open() { o.m.Update(tea.KeyMsg{Type: tea.KeyEnter}) }

// Back leaves the waterfall, as esc does.
func (o *Offscreen) Back() { o.m.Update(tea.KeyMsg{Type: tea.KeyEsc}) }
