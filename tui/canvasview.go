package tui

import (
	"strings"

	"github.com/NimbleMarkets/ntcharts/canvas"
	"github.com/charmbracelet/lipgloss"
)

// cellLook is what decides how a chart cell is drawn: every style the
// charts give their cells differs only in these.
type cellLook struct {
	fg, bg      lipgloss.TerminalColor
	bold, faint bool
}

// canvasLines returns c's cells as lines, each run of cells that look alike
// in one styled span. ntcharts' own View renders every cell through
// lipgloss on its own, which cost four fifths of a chart redraw and made
// each line several times longer for the layout to measure; the runes and
// colours on screen are the same.
func canvasLines(c *canvas.Model) []string {
	w, h := c.Width(), c.Height()
	spans := map[cellLook][2]string{} // each look's opening and closing sequences
	lines := make([]string, 0, h)
	var b, run strings.Builder
	for y := range h {
		b.Reset()
		var open cellLook
		opened := false
		flush := func() {
			if run.Len() == 0 {
				return
			}
			s := spans[open]
			b.WriteString(s[0])
			b.WriteString(run.String())
			b.WriteString(s[1])
			run.Reset()
		}
		for x := range w {
			cell := c.Cell(canvas.Point{X: x, Y: y})
			look := cellLook{cell.Style.GetForeground(), cell.Style.GetBackground(), cell.Style.GetBold(), cell.Style.GetFaint()}
			if !opened || look != open {
				flush()
				if _, ok := spans[look]; !ok {
					spans[look] = styleSpan(cell.Style)
				}
				open, opened = look, true
			}
			r := cell.Rune
			if r == 0 {
				r = ' '
			}
			run.WriteRune(r)
		}
		flush()
		lines = append(lines, b.String())
	}
	return lines
}

// styleSpan returns the sequences st writes before and after its text.
func styleSpan(st lipgloss.Style) [2]string {
	const mark = "x"
	before, after, _ := strings.Cut(st.Render(mark), mark)
	return [2]string{before, after}
}
