package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/latscope/latscope/report"
	"github.com/latscope/latscope/session"
)

func newReportCmd() *cobra.Command {
	var format, compare, output string
	cmd := &cobra.Command{
		Use:   "report FILE",
		Short: "Summarise a recorded session: Markdown, JSON, CSV, or one offline HTML page with charts",
		Long: `report replays a recording and writes its summary: latency percentiles per
metric and per stage, throughput, errors by kind and the top error messages,
the TTFT breakdown with each stage's provenance, the server and GPU, markers
and insights.

Formats (--format, or from -o's extension):
  md    Markdown tables, to paste into an incident or a pull request
  json  the same object as 'latscope run --json', plus a "report" key with the
        time series and the TTFT breakdown bands
  csv   one row per (metric or stage, statistic): section, name, statistic,
        value, unit, provenance; the first row, recording,partial, is 1 for a
        recording cut short
  html  one self-contained page (no scripts, nothing fetched) with SVG charts:
        the TTFT breakdown, TTFT and ITL p50/p99 over time, and queue depth

--compare OTHER puts a second recording beside FILE (the base) and gives every
statistic's change, absolute and in percent, and whether it is larger than the
noise between windows: both runs are cut into equal windows (10 s, shorter
for short runs so each has about 10), and a change is significant when
Welch's t-test on the per-window values gives p < 0.05 after Holm-Bonferroni
correction over all rows. Runs that differ in what they measured (target,
model, dialect, server, load, prompt or output lengths, latscope version) are
still compared, but every format says so first, and so does stderr: a change
may come from that difference rather than from the server.

A recording cut short (the writer was killed) is reported up to its last
complete frame; the report says it is partial, in every format, and a
warning names the offset. A file that is two recordings joined (cat a b > c)
is refused at the second one's offset. A second session header inside a file
is refused too. A request recorded twice (the same request id) is counted
once, with a warning saying how many copies were ignored.

FILE (or --compare) "-" reads a recording from standard input.`,
		Example: `  latscope report session.lsr
  latscope report session.lsr -o session.html
  latscope report before.lsr --compare after.lsr --format md
  latscope report session.lsr --format csv -o session.csv`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.EqualFold(format, string(report.RowsJSONL)) && compare == "" {
				return session.ExportRows(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), report.RowsJSONL, args[0], output) // one row per request, as export writes it
			}
			f, err := reportFormat(format, cmd.Flags().Changed("format"), output)
			if err != nil {
				return err
			}
			err = session.Report(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr(), session.ReportConfig{Format: f, Path: args[0], Compare: compare, Output: output})
			var ee *exitError
			if err != nil && cmd.Context().Err() != nil && !errors.As(err, &ee) {
				err = session.Exit(session.Interrupted, fmt.Errorf("interrupted: %w", err))
			}
			return err
		},
	}
	cmd.Flags().StringVarP(&format, "format", "f", "", "output format: md, json, csv or html (default from -o's extension, else md); jsonl writes one row per request, as latscope export does")
	cmd.Flags().StringVar(&compare, "compare", "", "a second recording to compare with FILE, which is the base")
	cmd.Flags().StringVarP(&output, "output", "o", "", "write the report to this file instead of standard output")
	return cmd
}

// reportFormat is --format when given, else what -o's extension says, else
// Markdown.
func reportFormat(flag string, given bool, output string) (report.Format, error) {
	if !given {
		if f, ok := report.FormatOf(output); ok {
			return f, nil
		}
		return report.Markdown, nil
	}
	f, err := report.ParseFormat(flag)
	if err != nil {
		return "", fmt.Errorf("--format: %w", err)
	}
	return f, nil
}
