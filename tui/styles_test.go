package tui

import (
	"io"
	"testing"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// On a 16-colour terminal every style draws exactly as lipgloss's own
// conversion would, from a colour already in the terminal's 16, so that
// no render converts one again.
func TestPaletteIsInTheTerminalsProfile(t *testing.T) {
	t.Parallel()
	for _, prof := range []termenv.Profile{termenv.ANSI, termenv.ANSI256, termenv.TrueColor} {
		r := lipgloss.NewRenderer(io.Discard)
		r.SetColorProfile(prof)
		raw, conv := defaultPalette(), defaultPalette().in(prof)
		check := func(name string, a, b lipgloss.Color) {
			before := r.NewStyle().Foreground(a).Render("x")
			after := r.NewStyle().Foreground(b).Render("x")
			if before != after {
				t.Errorf("profile %v, %s: %q drawn as %q, was %q", prof, name, b, after, before)
			}
			if _, ok := prof.Color(string(b)).(termenv.ANSIColor); prof == termenv.ANSI && !ok {
				t.Errorf("16 colours, %s: %q is not one of them", name, b)
			}
		}
		check("text", raw.text, conv.text)
		check("tokens", raw.tokens, conv.tokens)
		check("sel", raw.sel, conv.sel)
		for st, c := range raw.stage {
			check(string(st), c, conv.stage[st])
		}
	}
}
