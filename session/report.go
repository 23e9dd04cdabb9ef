package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/latscope/latscope/internal/atomicfile"
	"github.com/latscope/latscope/internal/fileread"
	"github.com/latscope/latscope/report"
)

// ReportConfig is one report of a recording, or the comparison of two.
type ReportConfig struct {
	Format report.Format
	// Path is the recording ("-": standard input), Compare the one to
	// compare it with ("": none); Output the file written ("": stdout).
	Path, Compare, Output string
}

// Report writes the report of a recording (or of two, compared) and
// returns the exit reason the recorded run gave: the whole of `latscope
// report` after its flags.
func Report(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, c ReportConfig) error {
	f, path, comparePath, output := c.Format, c.Path, c.Compare, c.Output
	for _, in := range []string{path, comparePath} {
		if in != "" && output != "" && sameFile(in, output) {
			return fmt.Errorf("-o %s would overwrite the recording %s", output, in)
		}
	}
	if fileread.IsStdin(path) && fileread.IsStdin(comparePath) {
		return errors.New("FILE and --compare both read standard input: give at most one as -")
	}
	file, name, cleanup, err := recordingArg(ctx, stdin, path)
	if err != nil {
		return err
	}
	defer cleanup()
	base, err := report.LoadAs(ctx, file, name)
	if err != nil {
		return err
	}
	recs := []*report.Recording{base}
	var buf bytes.Buffer
	if comparePath == "" {
		err = report.Write(&buf, f, base)
	} else {
		file, name, cleanup, lerr := recordingArg(ctx, stdin, comparePath)
		if lerr != nil {
			return lerr
		}
		defer cleanup()
		other, lerr := report.LoadAs(ctx, file, name)
		if lerr != nil {
			return lerr
		}
		recs = append(recs, other)
		cmp, cerr := report.CompareContext(ctx, base, other)
		if cerr != nil {
			return cerr
		}
		if w := cmp.MismatchWarning(); w != "" {
			fmt.Fprintln(stderr, "latscope: warning:", w)
		}
		err = report.WriteComparison(&buf, f, cmp)
	}
	if err != nil {
		return err
	}
	for _, r := range recs {
		for _, w := range r.Warnings {
			fmt.Fprintln(stderr, "latscope: warning:", w)
		}
	}
	if output == "" {
		_, err = stdout.Write(buf.Bytes())
	} else {
		// Whole or not at all: a full disk leaves no half report behind.
		err = atomicfile.WriteFile(output, buf.Bytes(), atomicfile.Options{Overwrite: true})
	}
	if err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	if comparePath != "" {
		return nil // a comparison judges no one run
	}
	return RecordedOutcome(stderr, base.Summary) // the exit code the recorded run gave
}

func sameFile(a, b string) bool {
	ia, err1 := os.Stat(a)
	ib, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(ia, ib)
}

// ExportRows writes a recording's requests as rows (JSON lines or CSV) on
// stdout, or to output, whole or not at all.
func ExportRows(ctx context.Context, stdin io.Reader, stdout io.Writer, f report.RowFormat, path, output string) error {
	if output != "" && sameFile(path, output) {
		return fmt.Errorf("-o %s would overwrite the recording %s", output, path)
	}
	file, name, cleanup, err := recordingArg(ctx, stdin, path)
	if err != nil {
		return err
	}
	defer cleanup()
	write := func(w io.Writer) error { return report.WriteRequests(ctx, w, f, file, name) }
	if output == "" {
		return write(stdout)
	}
	if err := atomicfile.WriteFunc(output, atomicfile.Options{}, write); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}
