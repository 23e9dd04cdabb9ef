package tui

import (
	"io"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/latscope/latscope/aggregate"
)

// plainRenderer renders without colour, like NO_COLOR.
func plainRenderer() *lipgloss.Renderer {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.Ascii)
	return r
}

func colorRenderer() *lipgloss.Renderer {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.TrueColor)
	return r
}

// session runs a synthetic session for secs seconds into a model of size
// w × h, one frame a second, as the live screen would see it.
func session(t testing.TB, o synthOpts, opts Options, secs, w, h int) (*model, *synth, *stepFeed) {
	t.Helper()
	s := newSynth(o)
	feed := &stepFeed{}
	m := newModel(feed, opts, plainRenderer())
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	for range secs {
		s.advance(1)
		feed.set(s.frame())
		m.Update(tickMsg{})
	}
	return m, s, feed
}

func keyMsg(k string) tea.KeyMsg {
	switch k {
	case "tab":
		return tea.KeyMsg{Type: tea.KeyTab}
	case "enter":
		return tea.KeyMsg{Type: tea.KeyEnter}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	case "up":
		return tea.KeyMsg{Type: tea.KeyUp}
	case "down":
		return tea.KeyMsg{Type: tea.KeyDown}
	case "left":
		return tea.KeyMsg{Type: tea.KeyLeft}
	case "right":
		return tea.KeyMsg{Type: tea.KeyRight}
	case "ctrl+c":
		return tea.KeyMsg{Type: tea.KeyCtrlC}
	case " ":
		return tea.KeyMsg{Type: tea.KeySpace, Runes: []rune{' '}}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
}

func press(m *model, keys ...string) tea.Cmd {
	var cmd tea.Cmd
	for _, k := range keys {
		_, cmd = m.Update(keyMsg(k))
	}
	return cmd
}

var testSLO = []aggregate.Objective{{Metric: "ttft.p99", Op: "<", Value: 400, Text: "400ms"}}

func sizeMsg(w, h int) tea.WindowSizeMsg { return tea.WindowSizeMsg{Width: w, Height: h} }

// ioPipe is an input that never sends a key until closed.
func ioPipe() (*io.PipeReader, *io.PipeWriter) { return io.Pipe() }

// first is a two-valued call's first value.
func first[A, B any](a A, _ B) A { return a }
