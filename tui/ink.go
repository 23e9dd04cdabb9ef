package tui

import (
	"strings"

	"github.com/charmbracelet/lipgloss"
)

// ink is a lipgloss style with the sequences it writes around a line kept:
// a frame paints a few hundred short pieces, and lipgloss works out each
// style's sequences, widths and margins on every Render. ink's Render
// gives the same string for text on one line; anything else goes to
// lipgloss.
type ink struct {
	style       lipgloss.Style
	open, close string
}

func newInk(style lipgloss.Style) ink {
	const mark = "x"
	open, close, _ := strings.Cut(style.Render(mark), mark)
	return ink{style: style, open: open, close: close}
}

// Render paints s as the style would.
func (k ink) Render(s string) string {
	if strings.ContainsAny(s, "\n\r\t") {
		return k.style.Render(s)
	}
	if k.open == "" && k.close == "" {
		return s
	}
	return k.open + s + k.close
}
