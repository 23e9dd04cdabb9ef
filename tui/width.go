package tui

import (
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
)

// cellWidth is ansi.StringWidth(s), the cells s takes on screen, found
// without grapheme segmentation when s holds only colour sequences and
// runes one cell wide on their own (ASCII, box drawing, blocks, braille, a
// few marks the dashboard uses). Measuring every line of every frame by
// grapheme clusters was half the cost of a frame; anything else still
// goes to ansi.StringWidth.
func cellWidth(s string) int {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == 0x1b:
			end, ok := skipCSI(s, i)
			if !ok {
				return ansi.StringWidth(s)
			}
			i = end
		case c >= 0x20 && c < 0x7f:
			n++
			i++
		case c < utf8.RuneSelf:
			return ansi.StringWidth(s)
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if !narrowRune(r) {
				return ansi.StringWidth(s)
			}
			n++
			i += size
		}
	}
	return n
}

// skipCSI returns the index after the control sequence "ESC [ … final" that
// starts at i; false for any other escape.
func skipCSI(s string, i int) (int, bool) {
	if i+1 >= len(s) || s[i+1] != '[' {
		return 0, false
	}
	for j := i + 2; j < len(s); j++ {
		switch c := s[j]; {
		case c >= 0x40 && c <= 0x7e:
			return j + 1, true
		case c < 0x20 || c > 0x3f:
			return 0, false
		}
	}
	return 0, false
}

// narrowRune reports whether r is one cell wide wherever it stands: no
// combining mark, emoji, East Asian wide or ambiguous form.
func narrowRune(r rune) bool {
	switch {
	case r >= 0x2500 && r <= 0x259f: // box drawing, block elements
		return true
	case r >= 0x2800 && r <= 0x28ff: // braille patterns
		return true
	}
	switch r {
	case '…', '·', '•', '—', '–', 'µ', '×', '±', '≤', '≥', '↑', '↓', '→', '←', '▲', '▼', '▶', '◀', '●', '○':
		return true
	}
	return false
}
