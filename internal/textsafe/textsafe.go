// Package textsafe makes text that came from outside latscope (a server's
// error body, a response header, a model or agent name, a recording's
// session name) safe to show: a terminal, a report or a spreadsheet shows
// it and never acts on it.
//
// A terminal acts on control characters: ESC starts sequences that retitle
// the window (OSC 0), write the clipboard (OSC 52), clear the screen or move
// the cursor (CSI), or pass bytes through tmux (DCS); CR and backspace
// overwrite what is shown; the 8-bit C1 characters (0x80–0x9f) do what
// their ESC forms do on terminals that honour them. Terminal and Line show
// each such character as a visible escape instead, Go style:
//
//	\x1b     a C0 control (0x00–0x1f) or DEL (0x7f); \t, \n and \r by their short names
//	\u009b   a C1 control or a Unicode bidirectional override or isolate
//	         (U+202A–U+202E, U+2066–U+2069), which can make shown text read
//	         other than it is
//	\x9b     a byte that is not part of valid UTF-8
//
// A code point and an invalid byte have different forms, so a reader can
// tell "\u009b" (the character, valid UTF-8) from "\x9b" (a stray byte).
// A backslash is not escaped: the escaping is idempotent, so text that goes
// through it twice (a sanitised field inside a sanitised line) does not
// grow backslashes, at the price that the literal text `\x1b` and an escaped
// ESC look alike. The output is always valid UTF-8.
//
// CSVCell also keeps a spreadsheet from running a cell as a formula, and
// JSON makes encoded JSON terminal-safe without changing what it decodes
// to.
package textsafe

import (
	"strings"
	"unicode/utf8"
)

// mode says which characters besides the always-unsafe ones are escaped.
type mode uint8

const (
	// multiLine keeps tab and newline: text that may span lines.
	multiLine mode = iota
	// singleLine escapes them too, and the Unicode line and paragraph
	// separators: a field that must stay on one line.
	singleLine
)

// Terminal returns s with every control character except tab and newline,
// every C1 control, bidirectional override and invalid UTF-8 byte replaced
// by a visible escape (see the package documentation). A string that needs
// no change is returned as it is, without allocating.
func Terminal(s string) string { return escape(s, multiLine) }

// Line is Terminal for a field that must stay on one line (a name, a
// header value, a model, one status line's message): tab, newline and the
// Unicode line and paragraph separators (U+2028, U+2029) are escaped too,
// so the text cannot start a line of its own that looks like latscope's.
func Line(s string) string { return escape(s, singleLine) }

// IndexUnsafe returns the byte index of the first character of s that
// Terminal would escape, or -1 if there is none. Tests of an output that
// must hold no raw control character use it; Terminal's own fast path is
// the same scan.
func IndexUnsafe(s string) int { return firstUnsafe(s, multiLine) }

// IndexUnsafeLine is IndexUnsafe for Line.
func IndexUnsafeLine(s string) int { return firstUnsafe(s, singleLine) }

func escape(s string, m mode) string {
	i := firstUnsafe(s, m)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !unsafeRune(r, size, m) {
			b.WriteString(s[i : i+size])
			i += size
			continue
		}
		writeEscape(&b, s[i], r, size)
		i += size
	}
	return b.String()
}

// firstUnsafe is the index of the first character that m escapes, or -1.
func firstUnsafe(s string, m mode) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if unsafeASCII(c, m) {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if unsafeRune(r, size, m) {
			return i
		}
		i += size
	}
	return -1
}

func unsafeASCII(c byte, m mode) bool {
	switch {
	case c == '\t' || c == '\n':
		return m == singleLine
	case c < 0x20 || c == 0x7f:
		return true
	}
	return false
}

// unsafeRune says whether the character r, size bytes long in s, is
// escaped; an invalid byte decodes as utf8.RuneError of size 1.
func unsafeRune(r rune, size int, m mode) bool {
	switch {
	case r < utf8.RuneSelf:
		return unsafeASCII(byte(r), m)
	case r == utf8.RuneError && size == 1:
		return true // not valid UTF-8
	case r <= 0x9f:
		return true // C1 control
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true // bidirectional embedding, override or isolate
	case r == 0x2028 || r == 0x2029:
		return m == singleLine
	}
	return false
}

const hexDigits = "0123456789abcdef"

// writeEscape writes the visible form of the unsafe character r that
// starts with byte c and is size bytes long.
func writeEscape(b *strings.Builder, c byte, r rune, size int) {
	switch {
	case r == utf8.RuneError && size == 1:
		b.WriteString(`\x`)
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0xf])
	case r == '\t':
		b.WriteString(`\t`)
	case r == '\n':
		b.WriteString(`\n`)
	case r == '\r':
		b.WriteString(`\r`)
	case r < utf8.RuneSelf:
		b.WriteString(`\x`)
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0xf])
	default: // every escaped code point is below U+10000
		b.WriteString(`\u`)
		for shift := 12; shift >= 0; shift -= 4 {
			b.WriteByte(hexDigits[r>>shift&0xf])
		}
	}
}
