package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/internal/fileread"
	"github.com/latscope/latscope/recorder"
	"github.com/latscope/latscope/session"
)

// maxRepeat bounds --repeat: more runs than this is a typo, not a plan.
const maxRepeat = 1000

// repeatFlags are --repeat and --compare, shared by run and demo.
type repeatFlags struct {
	n       int
	compare string // an earlier --repeat --json output to compare with
}

// addRepeatFlags registers --repeat and --compare.
func addRepeatFlags(fl *pflag.FlagSet, rf *repeatFlags) {
	fl.IntVar(&rf.n, "repeat", 1, "run the same benchmark this many times, headless (a fresh seed each unless --seed is given), "+
		"and report each run and, per headline figure, the mean and its 95% confidence interval; "+
		"with --record FILE.lsr each run records to FILE-1.lsr, FILE-2.lsr, ...")
	fl.StringVar(&rf.compare, "compare", "", "with --repeat: compare the runs' figures with an earlier --repeat --json output (BASE.json) "+
		"and say what changed beyond the runs' spread, as latscope compare does")
}

// repeatable runs once, the command's single measurement, or --repeat
// times. once writes its summary to the command's stdout and returns the
// run's outcome, as runSession does. With --compare, the runs' figures are
// then tested against the earlier ones: on stdout after the table, or on
// stderr when stdout is --json.
func repeatable(cmd *cobra.Command, f *loadFlags, rf repeatFlags, once func() error) error {
	n := rf.n
	switch {
	case n < 1 || n > maxRepeat:
		return fmt.Errorf("--repeat %d: want 1 to %d runs", n, maxRepeat)
	case rf.compare != "" && n < 2:
		return errors.New("--compare needs --repeat 2 or more: a comparison tests the difference against the runs' spread")
	case n == 1:
		return once()
	}
	var base []aggregate.RepeatedQuantity
	if rf.compare != "" { // read first: a wrong file costs no run
		var err error
		if base, err = readRepeated(rf.compare); err != nil {
			return fmt.Errorf("--compare: %w", err)
		}
	}
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	defer cmd.SetOut(stdout)
	r := repeater{f: f, n: n, jsonOut: f.jsonOut, record: f.record, seedGiven: f.seed.given}
	if err := r.checkRecordPaths(); err != nil {
		return err
	}
	runErr := r.runAll(cmd.Context(), stderr, func(w io.Writer) error {
		cmd.SetOut(w) // a buffer is no terminal: each run is headless
		return once()
	})
	if err := r.write(stdout); err != nil {
		return errors.Join(runErr, err)
	}
	if base != nil && len(r.summaries) > 0 {
		out := stdout
		if r.jsonOut {
			out = stderr
		}
		cmp := aggregate.CompareRepeated(base, aggregate.Repeat(r.summaries).Quantities)
		if err := aggregate.WriteRepeatedComparison(out, cmp); err != nil {
			return errors.Join(runErr, err)
		}
	}
	return runErr
}

// repeater is one --repeat: the settings it changes from run to run and
// what the runs measured.
type repeater struct {
	f         *loadFlags
	n         int
	jsonOut   bool   // as asked; each run itself writes JSON, to be read back
	record    string // --record as given; each run gets its own file
	seedGiven bool
	summaries []aggregate.Summary
	raws      []json.RawMessage
}

// recordPath is run i's recording (from 1): FILE.lsr → FILE-i.lsr.
func recordPath(path string, i int) string {
	ext := filepath.Ext(filepath.Base(path))
	return strings.TrimSuffix(path, ext) + "-" + strconv.Itoa(i) + ext
}

// checkRecordPaths checks every run's recording path before the first
// run, so a later run cannot fail on one after the earlier ones ran.
func (r *repeater) checkRecordPaths() error {
	if r.record == "" {
		return nil
	}
	for i := 1; i <= r.n; i++ {
		if err := recorder.CheckPath(recordPath(r.record, i), recorder.Options{Overwrite: r.f.recordOverwrite}); err != nil {
			return fmt.Errorf("--record (run %d of %d): %w", i, r.n, err)
		}
	}
	return nil
}

// runAll runs the benchmark n times. It stops at an interruption (that
// run, cut short, is left out) or at a failure other than a missed
// objective (that run's summary is kept when it printed one), and returns
// what should set the exit code.
func (r *repeater) runAll(ctx context.Context, stderr io.Writer, once func(io.Writer) error) error {
	var sloMissed error
	for i := 1; i <= r.n; i++ {
		if ctx.Err() != nil {
			return session.Exit(session.Interrupted, fmt.Errorf("interrupted before run %d of %d", i, r.n))
		}
		if !r.seedGiven {
			r.f.seed = seedFlag{} // a fresh seed each run: no prompt cache shared between them
		}
		if r.record != "" {
			r.f.record = recordPath(r.record, i)
		}
		r.f.jsonOut = true
		fmt.Fprintf(stderr, "latscope: run %d of %d\n", i, r.n)
		var out bytes.Buffer
		err := once(&out)
		if session.ReasonOf(err) == session.Interrupted {
			fmt.Fprintf(stderr, "latscope: run %d of %d was interrupted; it is left out of the statistics\n", i, r.n)
			return err
		}
		if out.Len() > 0 {
			if perr := r.add(out.Bytes()); perr != nil {
				return errors.Join(err, perr)
			}
		}
		switch {
		case session.ReasonOf(err) == session.SLOMissed:
			sloMissed = err
		case err != nil:
			return fmt.Errorf("run %d of %d: %w", i, r.n, err)
		}
	}
	return sloMissed
}

// add keeps one run's summary, read back from the JSON it printed (the
// session prints its summary rather than return it), and the JSON itself.
func (r *repeater) add(raw []byte) error {
	var s aggregate.Summary
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("read back run %d's summary: %w", len(r.summaries)+1, err)
	}
	r.summaries = append(r.summaries, s)
	r.raws = append(r.raws, bytes.TrimSpace(raw))
	return nil
}

// write prints the runs and their statistics, as a table or as JSON;
// nothing when no run printed a summary (the first failed to start), as a
// single run prints none.
func (r *repeater) write(w io.Writer) error {
	if len(r.summaries) == 0 {
		return nil
	}
	rep := aggregate.Repeat(r.summaries)
	if r.jsonOut {
		return aggregate.WriteRepeatedJSON(w, r.raws, rep)
	}
	return aggregate.WriteRepeatedTable(w, rep)
}

// maxRepeatedJSON bounds a file compare reads: a run's summary is tens of
// KiB, and --repeat stops at 1000 runs.
const maxRepeatedJSON = 256 * fileread.MiB

func newCompareCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "compare BASE.json OTHER.json",
		Short: "Compare two sets of repeated runs (run/demo --repeat N --json): what changed beyond the runs' spread",
		Long: `compare reads the --json output of two runs or demos with --repeat and, for
each headline figure (TTFT, ITL and E2E at p50 and p99, output tok/s, req/s,
error rate, goodput), tests the difference of the means against the spread of
the runs: Welch's t-test over the two sets of per-run values, Holm-Bonferroni
corrected over the figures. A figure within the spread says "no significant
change". Each side needs 2 runs or more; 5 or more make small changes visible.`,
		Example: `  latscope demo --no-tui --repeat 5 -d 10s --json > before.json
  latscope demo --no-tui --repeat 5 -d 10s --json > after.json
  latscope compare before.json after.json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			base, err := readRepeated(args[0])
			if err != nil {
				return err
			}
			other, err := readRepeated(args[1])
			if err != nil {
				return err
			}
			return aggregate.WriteRepeatedComparison(cmd.OutOrStdout(), aggregate.CompareRepeated(base, other))
		},
	}
}

func readRepeated(path string) ([]aggregate.RepeatedQuantity, error) {
	file, err := fileread.Open(path, fileread.Limit{Max: maxRepeatedJSON, What: "repeated runs' JSON"})
	if err != nil {
		return nil, err
	}
	defer file.Close()
	qs, err := aggregate.ReadRepeated(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return qs, nil
}
