package textsafe_test

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"

	"github.com/latscope/latscope/internal/textsafe"
	"github.com/latscope/latscope/internal/textsafe/hostile"
)

func TestCSVCell(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"ttft", "ttft"},
		{"-12.5", "-12.5"},
		{"+3", "+3"},
		{"-1e-3", "-1e-3"},
		{".5", ".5"},
		{"-.5E+2", "-.5E+2"},
		{"-", "-"},
		{"-1.2.3", "'-1.2.3"},
		{"-1e", "'-1e"},
		{"-Inf", "'-Inf"},
		{"-2+3", "'-2+3"},
		{"=1+1", "'=1+1"},
		{"+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"},
		{"@SUM(A1)", "'@SUM(A1)"},
		{"  =1", "  '=1"},
		{"\t=1", `\t=1`}, // escaped, so the cell starts with a backslash
		{"\r=1", `\r=1`},
		{"＝1+1", "'＝1+1"},
		{"ok;=1+1", "ok;'=1+1"},
		{"a; -1;-b", "a; -1;'-b"},
		{"=a;=b", "'=a;'=b"},
		{"timeout: context deadline exceeded", "timeout: context deadline exceeded"},
		{"rate-limited - retry", "rate-limited - retry"},
		{"line\nbreak", `line\nbreak`},
		{"=\x1b[2J", `'=\x1b[2J`},
	} {
		if got := textsafe.CSVCell(tc.in); got != tc.want {
			t.Errorf("CSVCell(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestCSVFormulasThroughEncoder writes the hostile cells with
// encoding/csv, as the report does, and reads them back: every cell, and
// every ';'-separated part of the row a ';'-locale spreadsheet would see,
// is text.
func TestCSVFormulasThroughEncoder(t *testing.T) {
	t.Parallel()
	var cells []string
	for _, c := range hostile.All() {
		cells = append(cells, textsafe.CSVCell(c.Text))
	}
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	if err := w.Write(cells); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	if i := textsafe.IndexUnsafeLine(strings.TrimSuffix(buf.String(), "\n")); i >= 0 {
		t.Fatalf("the CSV row holds an unsafe character at byte %d: %q", i, buf.String())
	}
	back, err := csv.NewReader(&buf).Read()
	if err != nil {
		t.Fatal(err)
	}
	for i, cell := range back {
		if cell != cells[i] {
			t.Errorf("cell %d read back as %q, want %q", i, cell, cells[i])
		}
		assertNoFormula(t, cell)
	}
}

// assertNoFormula fails if the cell, or a ';'-separated part of it, starts
// (after spaces) with a formula character and is not a plain number.
func assertNoFormula(t *testing.T, cell string) {
	t.Helper()
	for part := range strings.SplitSeq(cell, ";") {
		p := strings.TrimLeft(part, " ")
		if p == "" || p == "-" || isNumber(p) {
			continue
		}
		for _, trigger := range []string{"=", "+", "-", "@", "\t", "\r", "＝", "＋", "－", "＠"} {
			if strings.HasPrefix(p, trigger) {
				t.Fatalf("cell %q: part %q starts with %q", cell, p, trigger)
			}
		}
	}
}

// isNumber is the rule CSVCell documents, written another way.
func isNumber(s string) bool {
	s = strings.TrimLeft(s, "+-")
	if strings.Count(s, "+")+strings.Count(s, "-") > 1 {
		return false
	}
	mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	if hasExp {
		exp = strings.TrimLeft(exp, "+-")
		if exp == "" || strings.Trim(exp, "0123456789") != "" {
			return false
		}
	}
	if strings.Count(mant, ".") > 1 || strings.Trim(mant, ".") == "" {
		return false
	}
	return strings.Trim(mant, "0123456789.") == ""
}

func FuzzCSVCell(f *testing.F) {
	for _, c := range hostile.All() {
		f.Add(c.Text)
	}
	for _, s := range []string{"-12.5", "+1e9", "-", "a;-b", " ; =", "-1e+"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := textsafe.CSVCell(s)
		assertSafe(t, got, true)
		if again := textsafe.CSVCell(got); again != got {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, got, again)
		}
		assertNoFormula(t, got)
		// Only an apostrophe is ever added to the escaped text.
		if strings.ReplaceAll(got, "'", "") != strings.ReplaceAll(textsafe.Line(s), "'", "") {
			t.Fatalf("CSVCell(%q) = %q changes more than formulas", s, got)
		}
	})
}
