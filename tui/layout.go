package tui

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// fit pads or cuts s to exactly w cells.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	n := cellWidth(s)
	if n > w {
		return ansi.Truncate(s, w, "…")
	}
	return s + strings.Repeat(" ", w-n)
}

// fitWords cuts s to at most w cells at a word boundary, marking the cut
// with "…", so no word is shown half; a first word longer than w is cut.
func fitWords(s string, w int) string {
	if cellWidth(s) <= w {
		return s
	}
	if w <= 1 {
		return ansi.Truncate(s, w, "")
	}
	cut := ansi.Truncate(s, w-1, "")
	plain := ansi.Strip(cut)
	if i := strings.LastIndexByte(strings.TrimRight(plain, " "), ' '); i > 0 && !strings.HasPrefix(ansi.Strip(s)[len(plain):], " ") {
		cut = ansi.Truncate(s, cellWidth(plain[:i]), "")
	}
	return strings.TrimRight(cut, " ") + "…"
}

// rule is a section title: "─ title ───…" across w cells.
func rule(st *styles, title string, w int) string {
	if title == "" {
		return st.faint.Render(strings.Repeat("─", max(w, 0)))
	}
	head := st.faint.Render("─ ") + title + " "
	n := cellWidth(head)
	if n >= w {
		return fit(head, w)
	}
	return head + st.faint.Render(strings.Repeat("─", w-n))
}

// column is a block of lines drawn w cells wide.
type column struct {
	lines []string
	w     int
}

// beside lays columns side by side, h lines tall, separated by a faint
// vertical line; every line of the result is exactly the sum of the
// widths plus the separators.
func beside(st *styles, h int, cols ...column) []string {
	sep := st.faint.Render("│")
	out := make([]string, h)
	var b strings.Builder
	for i := range h {
		b.Reset()
		for j, c := range cols {
			if j > 0 {
				b.WriteString(sep)
			}
			line := ""
			if i < len(c.lines) {
				line = c.lines[i]
			}
			b.WriteString(fit(line, c.w))
		}
		out[i] = b.String()
	}
	return out
}

// pad makes lines exactly h long, cutting or adding blank lines.
func pad(lines []string, h int) []string {
	if len(lines) >= h {
		return lines[:h]
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return lines
}

// visibleWidth is the width of s in cells, escape sequences aside.
func visibleWidth(s string) int { return cellWidth(s) }

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K { return slices.Sorted(maps.Keys(m)) }
