package tui

import (
	"io"
	"testing"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// ink paints every piece as its lipgloss style does, in every colour
// profile, nested pieces and the cases it hands to lipgloss included.
func TestInkRendersAsItsStyle(t *testing.T) {
	texts := []string{"", "x", "ttft 182 ms", "  spaced  ", "…│─⣀", "two\nlines", "tab\tstop", "nested " + "\x1b[1mbold\x1b[0m" + " rest"}
	for _, prof := range []termenv.Profile{termenv.Ascii, termenv.ANSI, termenv.ANSI256, termenv.TrueColor} {
		r := lipgloss.NewRenderer(io.Discard)
		r.SetColorProfile(prof)
		st := newStyles(r, false)
		inks := []ink{st.text, st.dim, st.faint, st.bold, st.title, st.accent, st.good, st.warn, st.bad, st.selected, st.key,
			st.p50, st.p99, st.slo, st.waiting, st.running, st.inFlight, st.tokens}
		for _, k := range st.stage {
			inks = append(inks, k)
		}
		for i, k := range inks {
			for _, s := range texts {
				if got, want := k.Render(s), k.style.Render(s); got != want {
					t.Errorf("profile %v, ink %d, %q: %q, lipgloss %q", prof, i, s, got, want)
				}
			}
		}
	}
}
