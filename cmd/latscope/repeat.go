package main

import (
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/session"
)

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
// times (session.Repeat): each run headless, with its own seed unless
// --seed was given, its summary as JSON read back, its own recording.
func repeatable(cmd *cobra.Command, f *loadFlags, rf repeatFlags, once func() error) error {
	if rf.n == 1 && rf.compare == "" {
		return once()
	}
	stdout := cmd.OutOrStdout()
	defer cmd.SetOut(stdout)
	r := session.Repeat{
		N: rf.n, Compare: rf.compare, JSON: f.jsonOut, Record: f.record, RecordOverwrite: f.recordOverwrite,
		Once: repeatOnce(cmd, f, once),
	}
	return r.Run(cmd.Context(), stdout, cmd.ErrOrStderr())
}

// repeatOnce is each run of a --repeat: a fresh seed unless --seed was
// given (no prompt cache shared between runs), its own recording, its
// summary as JSON to out (a buffer, no terminal: each run is headless).
func repeatOnce(cmd *cobra.Command, f *loadFlags, once func() error) func(io.Writer, string) error {
	seedGiven := f.seed.Given()
	return func(out io.Writer, record string) error {
		if !seedGiven {
			f.seed = session.Seed{}
		}
		f.record, f.jsonOut = record, true
		cmd.SetOut(out)
		return once()
	}
}

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
			base, err := session.ReadRepeated(args[0])
			if err != nil {
				return err
			}
			other, err := session.ReadRepeated(args[1])
			if err != nil {
				return err
			}
			return aggregate.WriteRepeatedComparison(cmd.OutOrStdout(), aggregate.CompareRepeated(base, other))
		},
	}
}
