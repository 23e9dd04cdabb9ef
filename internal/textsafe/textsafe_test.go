package textsafe_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/latscope/latscope/internal/textsafe"
	"github.com/latscope/latscope/internal/textsafe/hostile"
)

func TestTerminal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"plain text", "plain text"},
		{"tab\tand\nnewline stay", "tab\tand\nnewline stay"},
		{"café 日本 ✓ \ufffd", "café 日本 ✓ \ufffd"}, // a valid U+FFFD is a character like any other
		{"\x1b]0;HACKED\x07", `\x1b]0;HACKED\x07`},
		{"\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"a\rb", `a\rb`},
		{"nul\x00del\x7f", `nul\x00del\x7f`},
		{"\u009b31m", `\u009b31m`},
		{"\x9b31m", `\x9b31m`},
		{"\xc2", `\xc2`},                 // a sequence cut short
		{"\xc0\x9b", `\xc0\x9b`},         // an overlong ESC
		{"\xed\xa0\x80", `\xed\xa0\x80`}, // a surrogate
		{"\u202eevil", `\u202eevil`},
		{"\u2066x\u2069", `\u2066x\u2069`},
		{"line\u2028sep", "line\u2028sep"}, // a terminal does not break on it
		{`already \x1b escaped`, `already \x1b escaped`},
	} {
		if got := textsafe.Terminal(tc.in); got != tc.want {
			t.Errorf("Terminal(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"model-7b", "model-7b"},
		{"a\tb\nc\r\nd", `a\tb\nc\r\nd`},
		{"x\u2028y\u2029z", `x\u2028y\u2029z`},
		{"\x1b]0;t\x07", `\x1b]0;t\x07`},
	} {
		if got := textsafe.Line(tc.in); got != tc.want {
			t.Errorf("Line(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestCleanTextIsNotCopied: the common case, text that needs nothing,
// costs no allocation.
func TestCleanTextIsNotCopied(t *testing.T) {
	clean := strings.Repeat("HTTP 503: upstream overloaded, café ✓ 日本 ", 8)
	for name, f := range map[string]func(string) string{
		"Terminal": textsafe.Terminal, "Line": textsafe.Line, "CSVCell": textsafe.CSVCell,
	} {
		if n := testing.AllocsPerRun(100, func() { _ = f(clean) }); n != 0 {
			t.Errorf("%s of clean text: %v allocations, want 0", name, n)
		}
	}
	b := []byte(`{"model":"café","n":-1.5}` + "\n")
	if n := testing.AllocsPerRun(100, func() { _ = textsafe.JSON(b) }); n != 0 {
		t.Errorf("JSON of clean text: %v allocations, want 0", n)
	}
}

// TestHostileCorpus: no hostile sequence survives, and the visible word
// each carries does.
func TestHostileCorpus(t *testing.T) {
	t.Parallel()
	check := func(fn string, f func(string) string, cases []hostile.Case) {
		for _, c := range cases {
			got := f(c.Text)
			if leaks := hostile.Leaks(got, []hostile.Case{c}); leaks != nil {
				t.Errorf("%s(%s) = %q still holds %q", fn, c.Name, got, c.Raw)
			}
			if strings.Contains(c.Text, hostile.Word) && !strings.Contains(got, hostile.Word) {
				t.Errorf("%s(%s) = %q lost the visible text", fn, c.Name, got)
			}
			assertSafe(t, got, fn == "Line")
		}
	}
	for _, c := range hostile.All() {
		if !strings.Contains(c.Text, c.Raw) {
			t.Errorf("hostile case %s: Raw %q is not in its Text %q", c.Name, c.Raw, c.Text)
		}
	}
	check("Terminal", textsafe.Terminal, hostile.Terminal)
	check("Line", textsafe.Line, hostile.Terminal)
	check("Line", textsafe.Line, hostile.Lines)
	all := textsafe.Line(hostile.Joined())
	if leaks := hostile.Leaks(all, append(append([]hostile.Case{}, hostile.Terminal...), hostile.Lines...)); leaks != nil {
		t.Errorf("Line(Joined()) leaks %v", leaks)
	}
	if leaks := hostile.Leaks(hostile.Joined(), hostile.Terminal); len(leaks) != len(hostile.Terminal) {
		t.Errorf("Leaks finds %d of the %d terminal cases in their raw text", len(leaks), len(hostile.Terminal))
	}
}

// assertSafe fails t if out holds anything a terminal acts on: invalid
// UTF-8, a C0 control other than tab and newline (and those too for a
// single line), DEL, a C1 control or a bidirectional override.
func assertSafe(t *testing.T, out string, singleLine bool) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Fatalf("output %q is not valid UTF-8", out)
	}
	for i, r := range out {
		bad := r < 0x20 && r != '\t' && r != '\n' || r == 0x7f || r >= 0x80 && r <= 0x9f ||
			r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 ||
			singleLine && (r == '\t' || r == '\n' || r == 0x2028 || r == 0x2029)
		if bad {
			t.Fatalf("output %q holds %U at byte %d", out, r, i)
		}
	}
}

// unescape reverses the escaping for text that held no backslash: the
// escaped form names every byte it replaced.
func unescape(t *testing.T, s string) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 >= len(s) {
			t.Fatalf("a lone backslash ends %q", s)
		}
		switch s[i+1] {
		case 't', 'n', 'r':
			b.WriteByte(map[byte]byte{'t': '\t', 'n': '\n', 'r': '\r'}[s[i+1]])
			i++
		case 'x':
			v, err := strconv.ParseUint(s[i+2:i+4], 16, 8)
			if err != nil {
				t.Fatalf("bad \\x escape in %q", s)
			}
			b.WriteByte(byte(v))
			i += 3
		case 'u':
			v, err := strconv.ParseUint(s[i+2:i+6], 16, 32)
			if err != nil {
				t.Fatalf("bad \\u escape in %q", s)
			}
			b.WriteRune(rune(v))
			i += 5
		default:
			t.Fatalf("unknown escape %q in %q", s[i:i+2], s)
		}
	}
	return b.String()
}

// checkEscaping is what both fuzz targets assert of one escaping function.
func checkEscaping(t *testing.T, f func(string) string, index func(string) int, s string, singleLine bool) {
	got := f(s)
	assertSafe(t, got, singleLine)
	if again := f(got); again != got {
		t.Fatalf("not idempotent: %q -> %q -> %q", s, got, again)
	}
	if i := index(s); (i < 0) != (got == s) {
		t.Fatalf("index %d for %q, but the escaped form is %q", i, s, got)
	}
	if !strings.Contains(s, `\`) {
		if back := unescape(t, got); back != s {
			t.Fatalf("%q escaped to %q reads back as %q", s, got, back)
		}
	}
}

func FuzzTerminal(f *testing.F) {
	for _, c := range hostile.All() {
		f.Add(c.Text)
	}
	f.Add("\xf4\x90\x80\x80 \xef\xbf\xbd \u0085")
	f.Fuzz(func(t *testing.T, s string) {
		checkEscaping(t, textsafe.Terminal, textsafe.IndexUnsafe, s, false)
	})
}

func FuzzLine(f *testing.F) {
	for _, c := range hostile.All() {
		f.Add(c.Text)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkEscaping(t, textsafe.Line, textsafe.IndexUnsafeLine, s, true)
	})
}

func ExampleTerminal() {
	fmt.Printf("%s\n", textsafe.Terminal("HTTP 500: \x1b]0;HACKED\x07 \x9b2J"))
	fmt.Printf("%s\n", textsafe.Line("name\nlatscope: all ok"))
	// Output:
	// HTTP 500: \x1b]0;HACKED\x07 \x9b2J
	// name\nlatscope: all ok
}
