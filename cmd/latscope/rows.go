package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/latscope/latscope/report"
	"github.com/latscope/latscope/session"
)

func newExportCmd() *cobra.Command {
	var format, output string
	cmd := &cobra.Command{
		Use:   "export FILE",
		Short: "Write every request of a recording as one row: JSON lines or CSV, for a spreadsheet, pandas or DuckDB",
		Long: `export reads a recording and writes one row per request: its outcome and
error, token counts (prompt, cached, output, reasoning), TTFT, E2E, TPOT, its
inter-token gaps' mean, median and largest, when it was due (wall clock and
seconds from the start), the session (agent) and region, and every stage of
its TTFT breakdown with the stage's provenance and source. Times are in
milliseconds. docs/export.md lists the columns.

Formats (--format, or from -o's extension; JSON lines by default):
  jsonl  one JSON object a line, the keys named as the CSV's columns
  csv    a header row, then one row a request

FILE "-" reads a recording from standard input.`,
		Example: `  latscope export session.lsr -o requests.csv
  latscope export session.lsr | duckdb -c "SELECT quantile_disc(ttft_ms, 0.99) FROM read_json_auto('/dev/stdin') WHERE outcome = 'ok' AND NOT warmup"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := exportFormat(format, cmd.Flags().Changed("format"), output)
			if err != nil {
				return err
			}
			return session.ExportRows(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), f, args[0], output)
		},
	}
	cmd.Flags().StringVarP(&format, "format", "f", "", "jsonl or csv (default from -o's extension, else jsonl)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "write the rows to this new file (whole or not at all) instead of standard output")
	return cmd
}

// exportFormat is --format when given, else what -o's extension says,
// else JSON lines.
func exportFormat(flag string, given bool, output string) (report.RowFormat, error) {
	if given {
		f, err := report.ParseRowFormat(flag)
		if err != nil {
			return "", fmt.Errorf("--format: %w", err)
		}
		return f, nil
	}
	if strings.EqualFold(filepath.Ext(output), ".csv") {
		return report.RowsCSV, nil
	}
	return report.RowsJSONL, nil
}
