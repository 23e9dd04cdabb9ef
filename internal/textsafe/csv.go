package textsafe

import (
	"strings"
	"unicode/utf8"
)

// CSVCell returns s made safe as one cell of a CSV file that a spreadsheet
// may open: escaped as Line escapes it (a row stays one line, and `cat`
// shows it safely), and kept from being run as a formula.
//
// A spreadsheet runs a cell that starts with '=', '+', '-' or '@' (OWASP
// adds tab and CR, which Line has already escaped) as a formula:
// =HYPERLINK(...) or a DDE call. Such a cell gets a leading apostrophe,
// which spreadsheets read as "this is text". Full-width forms of these
// characters (U+FF1D, U+FF0B, U+FF0D, U+FF20) count too, since some
// spreadsheets fold them to ASCII. Leading spaces are skipped before the
// check.
//
// A cell that is a plain decimal number ("-12.5", "+3", "-1e-3") is data,
// not a formula, and stays as it is: the rule is an optional sign, digits
// with at most one decimal point, and an optional exponent, nothing else.
// So does a lone "-", a table's "no value".
//
// The same check applies after every ';' in the cell: a spreadsheet in a
// locale whose list separator is ';' splits an unquoted CSV line at ';'
// (encoding/csv quotes a cell only for ',', '"', a line break or a leading
// space), so text after a ';' can become a cell of its own.
//
// CSVCell is idempotent. A cell that needs no change is returned as it is.
func CSVCell(s string) string {
	s = Line(s)
	first := formulaStart(s)
	if first < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	done := 0
	for at := first; at >= 0; {
		b.WriteString(s[done:at])
		b.WriteByte('\'')
		done = at
		next := nextSegment(s, at)
		if next < 0 {
			break
		}
		at = formulaStart(s[next:])
		if at >= 0 {
			at += next
		}
	}
	b.WriteString(s[done:])
	return b.String()
}

// formulaStart returns the index in s of the first segment start (the
// cell's start, or just after a ';', past leading spaces) where a formula
// could begin, or -1.
func formulaStart(s string) int {
	for seg := 0; seg >= 0; {
		at := seg
		for at < len(s) && s[at] == ' ' {
			at++
		}
		if formulaTrigger(s[at:]) && !data(segment(s[at:])) {
			return at
		}
		seg = nextSegment(s, at)
	}
	return -1
}

// nextSegment returns the index just after the next ';' at or after from,
// or -1.
func nextSegment(s string, from int) int {
	i := strings.IndexByte(s[from:], ';')
	if i < 0 {
		return -1
	}
	return from + i + 1
}

// segment is s up to its first ';'.
func segment(s string) string {
	if i := strings.IndexByte(s, ';'); i >= 0 {
		return s[:i]
	}
	return s
}

// formulaTrigger says whether s starts with a character that makes a
// spreadsheet read a cell as a formula.
func formulaTrigger(s string) bool {
	if s == "" {
		return false
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return true
	}
	r, _ := utf8.DecodeRuneInString(s)
	switch r {
	case '＝', '＋', '－', '＠':
		return true
	}
	return false
}

// data says whether a segment that starts with a trigger is plain data: a
// number, or a lone '-' (a table's "no value").
func data(s string) bool { return s == "-" || plainNumber(s) }

// plainNumber says whether s is a decimal number and nothing else:
// [+-]? (digits [. digits*] | . digits) ([eE] [+-]? digits)?
func plainNumber(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	intDigits := digits(s[i:])
	i += intDigits
	fracDigits := 0
	if i < len(s) && s[i] == '.' {
		i++
		fracDigits = digits(s[i:])
		i += fracDigits
	}
	if intDigits == 0 && fracDigits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := digits(s[i:])
		if exp == 0 {
			return false
		}
		i += exp
	}
	return i == len(s)
}

// digits counts the ASCII digits at the start of s.
func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}
