package report

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// mdWriter writes Markdown and keeps the first error, so the sections need
// not check every line.
type mdWriter struct {
	w   *bufio.Writer
	err error
}

func (m *mdWriter) printf(format string, args ...any) {
	if m.err == nil {
		_, m.err = fmt.Fprintf(m.w, format, args...)
	}
}

func (m *mdWriter) finish() error {
	if m.err != nil {
		return m.err
	}
	return m.w.Flush()
}

func writeMarkdown(w io.Writer, rec *Recording) error {
	m := &mdWriter{w: bufio.NewWriter(w)}
	m.printf("# latscope report: %s\n\n", mdText(rec.Name()))
	m.banners(rec)
	m.keyValues(overview(rec))
	for _, t := range sections(rec) {
		m.table(t)
	}
	return m.finish()
}

func writeMarkdownComparison(w io.Writer, c *Comparison) error {
	m := &mdWriter{w: bufio.NewWriter(w)}
	m.printf("# latscope comparison: %s vs %s\n\n", mdText(c.Base.Name()), mdText(c.Other.Name()))
	if w := c.MismatchWarning(); w != "" {
		m.printf("> **Warning**: %s\n\n", mdText(w))
	}
	m.banners(c.Base)
	m.banners(c.Other)
	m.table(sideBySide(c))
	sig := changesTable(c, true)
	sig.Rows, sig.Columns = nil, nil
	for _, ch := range c.Significant() {
		sig.Items = append(sig.Items, headline(ch))
	}
	m.table(sig)
	all := changesTable(c, false)
	all.Notes = ruleNotes(c)
	m.table(all)
	return m.finish()
}

// banners say up front that a run was simulated, and what it is missing.
func (m *mdWriter) banners(rec *Recording) {
	if note := rec.SimulatedNote(); note != "" {
		label, rest, _ := strings.Cut(note, ": ")
		m.printf("> **%s**: %s\n\n", label, mdText(rest))
	}
	for _, w := range rec.Warnings {
		m.printf("> **Warning**: %s\n\n", mdText(w))
	}
}

func (m *mdWriter) keyValues(rows [][2]string) {
	m.printf("| | |\n|---|---|\n")
	for _, r := range rows {
		m.printf("| %s | %s |\n", mdText(r[0]), mdText(r[1]))
	}
	m.printf("\n")
}

func (m *mdWriter) table(t table) {
	m.printf("## %s\n\n", mdText(t.Title))
	if len(t.Columns) > 0 {
		m.row(t.Columns)
		m.printf("|%s\n", strings.Repeat("---|", len(t.Columns)))
		for _, r := range t.Rows {
			m.row(r)
		}
		m.printf("\n")
	}
	for _, item := range t.Items {
		m.printf("- %s\n", mdText(item))
	}
	if len(t.Items) > 0 {
		m.printf("\n")
	}
	for _, n := range t.Notes {
		m.printf("%s\n\n", mdText(n))
	}
}

func (m *mdWriter) row(cells []string) {
	m.printf("|")
	for _, c := range cells {
		m.printf(" %s |", mdText(c))
	}
	m.printf("\n")
}

// mdEscaper keeps text from a recording (model names, messages) from
// breaking a table or turning into markup: the pipe and Markdown's
// emphasis, code and link punctuation are backslash-escaped, line breaks
// become spaces. Underscores stay: inside a word (first_token) they are not
// emphasis.
var mdEscaper = strings.NewReplacer(
	`\`, `\\`, "|", `\|`, "`", "\\`", "*", `\*`,
	"[", `\[`, "]", `\]`, "\r\n", " ", "\n", " ", "\r", " ",
)

// htmlOpener is a "<" that could open an HTML tag, comment or declaration;
// a "<" before a space or a digit (p < 0.0001) cannot, and stays readable.
var htmlOpener = regexp.MustCompile(`<([A-Za-z/!?])`)

func mdText(s string) string { return htmlOpener.ReplaceAllString(mdEscaper.Replace(s), `\<$1`) }
