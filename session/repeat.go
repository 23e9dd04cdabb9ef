package session

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

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/internal/fileread"
	"github.com/latscope/latscope/recorder"
)

// MaxRepeat bounds Repeat.N: more runs than this is a typo, not a plan.
const MaxRepeat = 1000

// Repeat runs one measurement N times (`--repeat`) and reports each run
// and, per headline figure, the mean and its 95% confidence interval; with
// Compare, the runs' figures are then tested against an earlier set's.
type Repeat struct {
	N int
	// Compare is an earlier repeat's JSON output to compare with; "" none.
	Compare string
	// JSON prints the runs and their statistics as JSON.
	JSON bool
	// Record, when set, is FILE.lsr: run i records to FILE-i.lsr.
	Record          string
	RecordOverwrite bool
	// Once runs the measurement once, headless, writing its summary as
	// JSON on out and recording to record ("": none); it returns the run's
	// outcome, as Run does.
	Once func(out io.Writer, record string) error

	summaries []aggregate.Summary
	raws      []json.RawMessage
}

// Run runs the measurement, prints the runs' report on stdout (the
// comparison on stdout after the table, or on stderr when stdout is JSON)
// and returns what sets the exit code.
func (r *Repeat) Run(ctx context.Context, stdout, stderr io.Writer) error {
	switch {
	case r.N < 1 || r.N > MaxRepeat:
		return fmt.Errorf("--repeat %d: want 1 to %d runs", r.N, MaxRepeat)
	case r.Compare != "" && r.N < 2:
		return errors.New("--compare needs --repeat 2 or more: a comparison tests the difference against the runs' spread")
	}
	var base []aggregate.RepeatedQuantity
	if r.Compare != "" { // read first: a wrong file costs no run
		var err error
		if base, err = ReadRepeated(r.Compare); err != nil {
			return fmt.Errorf("--compare: %w", err)
		}
	}
	if err := r.checkRecordPaths(); err != nil {
		return err
	}
	runErr := r.runAll(ctx, stderr)
	if err := r.write(stdout); err != nil {
		return errors.Join(runErr, err)
	}
	if base != nil && len(r.summaries) > 0 {
		out := stdout
		if r.JSON {
			out = stderr
		}
		cmp := aggregate.CompareRepeated(base, aggregate.Repeat(r.summaries).Quantities)
		if err := aggregate.WriteRepeatedComparison(out, cmp); err != nil {
			return errors.Join(runErr, err)
		}
	}
	return runErr
}

// recordPath is run i's recording (from 1): FILE.lsr → FILE-i.lsr.
func recordPath(path string, i int) string {
	ext := filepath.Ext(filepath.Base(path))
	return strings.TrimSuffix(path, ext) + "-" + strconv.Itoa(i) + ext
}

// checkRecordPaths checks every run's recording path before the first
// run, so a later run cannot fail on one after the earlier ones ran.
func (r *Repeat) checkRecordPaths() error {
	if r.Record == "" {
		return nil
	}
	for i := 1; i <= r.N; i++ {
		if err := recorder.CheckPath(recordPath(r.Record, i), recorder.Options{Overwrite: r.RecordOverwrite}); err != nil {
			return fmt.Errorf("--record (run %d of %d): %w", i, r.N, err)
		}
	}
	return nil
}

// runAll runs the benchmark n times. It stops at an interruption (that
// run, cut short, is left out) or at a failure other than a missed
// objective (that run's summary is kept when it printed one), and returns
// what should set the exit code.
func (r *Repeat) runAll(ctx context.Context, stderr io.Writer) error {
	var sloMissed error
	for i := 1; i <= r.N; i++ {
		if ctx.Err() != nil {
			return Exit(Interrupted, fmt.Errorf("interrupted before run %d of %d", i, r.N))
		}
		record := ""
		if r.Record != "" {
			record = recordPath(r.Record, i)
		}
		fmt.Fprintf(stderr, "latscope: run %d of %d\n", i, r.N)
		var out bytes.Buffer
		err := r.Once(&out, record)
		if ReasonOf(err) == Interrupted {
			fmt.Fprintf(stderr, "latscope: run %d of %d was interrupted; it is left out of the statistics\n", i, r.N)
			return err
		}
		if out.Len() > 0 {
			if perr := r.add(out.Bytes()); perr != nil {
				return errors.Join(err, perr)
			}
		}
		switch {
		case ReasonOf(err) == SLOMissed:
			sloMissed = err
		case err != nil:
			return fmt.Errorf("run %d of %d: %w", i, r.N, err)
		}
	}
	return sloMissed
}

// add keeps one run's summary, read back from the JSON it printed (the
// session prints its summary rather than return it), and the JSON itself.
func (r *Repeat) add(raw []byte) error {
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
func (r *Repeat) write(w io.Writer) error {
	if len(r.summaries) == 0 {
		return nil
	}
	rep := aggregate.Repeat(r.summaries)
	if r.JSON {
		return aggregate.WriteRepeatedJSON(w, r.raws, rep)
	}
	return aggregate.WriteRepeatedTable(w, rep)
}

// maxRepeatedJSON bounds a file compare reads: a run's summary is tens of
// KiB, and --repeat stops at 1000 runs.
const maxRepeatedJSON = 256 * fileread.MiB

// ReadRepeated reads an earlier repeat's JSON output (its runs' figures).
func ReadRepeated(path string) ([]aggregate.RepeatedQuantity, error) {
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
