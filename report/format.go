package report

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"
)

// Format is one of the report's output formats.
type Format string

// The formats.
const (
	Markdown Format = "md"
	JSON     Format = "json"
	CSV      Format = "csv"
	HTML     Format = "html"
)

// Formats lists every format, in the order help text names them.
var Formats = []Format{Markdown, JSON, CSV, HTML}

func formatList() string {
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = string(f)
	}
	return strings.Join(names, ", ")
}

// ParseFormat returns the format named s, in any case.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats {
		if strings.EqualFold(s, string(f)) {
			return f, nil
		}
	}
	return "", errUnknown(Format(s))
}

func errUnknown(f Format) error {
	return fmt.Errorf("unknown format %q: want one of %s", f, formatList())
}

// FormatOf returns the format a file name's extension asks for, if any.
func FormatOf(path string) (Format, bool) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".md", ".markdown":
		return Markdown, true
	case ".json":
		return JSON, true
	case ".csv":
		return CSV, true
	case ".html", ".htm":
		return HTML, true
	}
	return "", false
}

// Write writes rec's report in format f.
func Write(w io.Writer, f Format, rec *Recording) error {
	var err error
	switch f {
	case Markdown:
		err = writeMarkdown(w, rec)
	case JSON:
		err = writeJSON(w, rec)
	case CSV:
		err = writeCSV(w, rec)
	case HTML:
		err = writeHTML(w, rec)
	default:
		err = errUnknown(f)
	}
	if err != nil {
		return fmt.Errorf("write %s report: %w", f, err)
	}
	return nil
}

// WriteComparison writes c in format f.
func WriteComparison(w io.Writer, f Format, c *Comparison) error {
	var err error
	switch f {
	case Markdown:
		err = writeMarkdownComparison(w, c)
	case JSON:
		err = writeJSONComparison(w, c)
	case CSV:
		err = writeCSVComparison(w, c)
	case HTML:
		err = writeHTMLComparison(w, c)
	default:
		err = errUnknown(f)
	}
	if err != nil {
		return fmt.Errorf("write %s comparison: %w", f, err)
	}
	return nil
}

// num formats v with prec decimals, or "-" when it is unknown.
func num(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, v)
}

// signed formats a change with its sign, or "-" when it is unknown.
func signed(v float64, prec int, suffix string) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%+.*f%s", prec, v, suffix)
}

// pValue formats a p-value, or "n/a" when the test could not run.
func pValue(p float64) string {
	switch {
	case math.IsNaN(p):
		return "n/a"
	case p < 0.0001:
		return "< 0.0001"
	}
	return fmt.Sprintf("%.4f", p)
}

// verdict says in words what a change's test found.
func verdict(c Change) string {
	switch {
	case !c.Tested():
		return "n/a (" + c.Untested() + ")"
	case c.Significant:
		return "yes"
	}
	return "no"
}
