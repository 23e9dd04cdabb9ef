package tui

import (
	"testing"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
)

// Every rune the fast path takes as one cell is one cell to ansi.StringWidth,
// on its own and after a colour sequence.
func TestNarrowRunesAreOneCell(t *testing.T) {
	for r := rune(0); r <= 0x10ffff; r++ {
		if !narrowRune(r) {
			continue
		}
		if got := ansi.StringWidth(string(r)); got != 1 {
			t.Errorf("%U %q: ansi.StringWidth %d, taken as 1", r, r, got)
		}
	}
}

func TestCellWidthIsStringWidth(t *testing.T) {
	for _, s := range []string{
		"", "plain", "\x1b[38;5;77m⣀⣠⡤\x1b[0m tail", "a\x1b[1;38;5;203mbold\x1b[0m…", "─ title ───",
		"wide 漢字", "e\u0301", "emoji 👍🏽", "\x1b]8;;http://x\x07link\x1b]8;;\x07", "tab\there",
		"cut \x1b[38;5", "bare \x1b", "µs ×2 ≤ 5 ↑", "é ü", "\x1b[0m", "\x7f",
	} {
		if got, want := cellWidth(s), ansi.StringWidth(s); got != want {
			t.Errorf("cellWidth(%q) = %d, ansi.StringWidth %d", s, got, want)
		}
	}
}

func FuzzCellWidth(f *testing.F) {
	f.Add("\x1b[38;5;77m⣀⣠ ok\x1b[0m")
	f.Add("漢字 e\u0301")
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		if got, want := cellWidth(s), ansi.StringWidth(s); got != want {
			t.Errorf("cellWidth(%q) = %d, ansi.StringWidth %d", s, got, want)
		}
	})
}
