package report

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"strconv"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/internal/textsafe"
)

// RowFormat is a format of the per-request export.
type RowFormat string

// The per-request export's formats.
const (
	RowsJSONL RowFormat = "jsonl" // one JSON object a line, the same keys as the CSV's columns
	RowsCSV   RowFormat = "csv"   // a header row, then one row a request
)

// ParseRowFormat reads --format of the per-request export.
func ParseRowFormat(s string) (RowFormat, error) {
	switch RowFormat(s) {
	case RowsJSONL, RowsCSV:
		return RowFormat(s), nil
	case "json", "ndjson":
		return RowsJSONL, nil
	}
	return "", fmt.Errorf("unknown format %q (want jsonl or csv)", s)
}

// rowColumn is one column of the per-request export: its name (the CSV
// header and the JSONL key) and its value.
type rowColumn struct {
	name  string
	value func(*aggregate.RequestRow) any
}

// rowColumns are the export's fixed columns, in order; the breakdown's
// stages follow them, three columns each (STAGE_ms, STAGE_prov,
// STAGE_src). docs/export.md describes each with its unit.
var rowColumns = []rowColumn{
	{"id", func(r *aggregate.RequestRow) any { return r.ID }},
	{"seq", func(r *aggregate.RequestRow) any { return r.Seq }},
	{"run_id", func(r *aggregate.RequestRow) any { return r.RunID }},
	{"session", func(r *aggregate.RequestRow) any { return r.Session }},
	{"region", func(r *aggregate.RequestRow) any { return r.Region }},
	{"model", func(r *aggregate.RequestRow) any { return r.Model }},
	{"dialect", func(r *aggregate.RequestRow) any { return r.Dialect }},
	{"warmup", func(r *aggregate.RequestRow) any { return r.Warmup }},
	{"outcome", func(r *aggregate.RequestRow) any { return r.Outcome }},
	{"run_ended", func(r *aggregate.RequestRow) any { return r.RunEnded }},
	{"status", func(r *aggregate.RequestRow) any { return r.Status }},
	{"error", func(r *aggregate.RequestRow) any { return r.Error }},
	{"flags", func(r *aggregate.RequestRow) any { return r.Flags }},
	{"intended", func(r *aggregate.RequestRow) any { return r.Intended }},
	{"offset_s", func(r *aggregate.RequestRow) any { return r.OffsetS }},
	{"sched_lag_ms", func(r *aggregate.RequestRow) any { return r.SchedLag }},
	{"connect_rtt_ms", func(r *aggregate.RequestRow) any { return r.Connect }},
	{"reused_conn", func(r *aggregate.RequestRow) any { return r.Reused }},
	{"prompt_tokens", func(r *aggregate.RequestRow) any { return r.Prompt }},
	{"cached_tokens", func(r *aggregate.RequestRow) any { return r.Cached }},
	{"output_tokens", func(r *aggregate.RequestRow) any { return r.Output }},
	{"reasoning_tokens", func(r *aggregate.RequestRow) any { return r.Reasoning }},
	{"chunks", func(r *aggregate.RequestRow) any { return r.Chunks }},
	{"ttft_ms", func(r *aggregate.RequestRow) any { return r.TTFT }},
	{"ttft_answer_ms", func(r *aggregate.RequestRow) any { return r.TTFTAnswer }},
	{"e2e_ms", func(r *aggregate.RequestRow) any { return r.E2E }},
	{"tpot_ms", func(r *aggregate.RequestRow) any { return r.TPOT }},
	{"itl_mean_ms", func(r *aggregate.RequestRow) any { return r.ITLMean }},
	{"itl_p50_ms", func(r *aggregate.RequestRow) any { return r.ITLP50 }},
	{"itl_max_ms", func(r *aggregate.RequestRow) any { return r.ITLMax }},
	{"tok_per_s", func(r *aggregate.RequestRow) any { return r.TokPerS }},
}

// WriteRequests writes every request event of the recording at path
// (called name in messages) as one row: JSON lines or CSV. It reads the
// file twice, first for the stages its requests hold (they are columns),
// and stops when ctx ends.
func WriteRequests(ctx context.Context, w io.Writer, f RowFormat, path, name string) error {
	var header *event.Session
	seen := map[event.Stage]bool{}
	if _, err := readEvents(ctx, path, name, func(ev event.Event) {
		if ev.Session != nil && header == nil {
			header = ev.Session
		}
		if r := ev.Request; r != nil {
			for _, t := range aggregate.RowOf(r, nil).Stages {
				seen[t.Stage] = true
			}
		}
	}); err != nil {
		return err
	}
	stages := event.OrderStages(event.BreakdownOrder(), maps.Keys(seen))
	out := newRowWriter(w, f, stages)
	var werr error
	if _, err := readEvents(ctx, path, name, func(ev event.Event) {
		if r := ev.Request; r != nil && werr == nil {
			row := aggregate.RowOf(r, header)
			werr = out.write(&row)
		}
	}); err != nil {
		return err
	}
	if werr != nil {
		return fmt.Errorf("write the rows: %w", werr)
	}
	return out.flush()
}

// rowWriter writes rows in one format.
type rowWriter struct {
	format RowFormat
	stages []event.Stage
	buf    *bufio.Writer
	csv    *csv.Writer
	cells  []string
}

func newRowWriter(w io.Writer, f RowFormat, stages []event.Stage) *rowWriter {
	rw := &rowWriter{format: f, stages: stages, buf: bufio.NewWriter(w)}
	if f == RowsCSV {
		rw.csv = csv.NewWriter(rw.buf)
		names := make([]string, 0, len(rowColumns)+3*len(stages))
		for _, c := range rowColumns {
			names = append(names, c.name)
		}
		for _, st := range stages {
			names = append(names, stageColumns(st)...)
		}
		for i := range names {
			names[i] = textsafe.CSVCell(names[i]) // a server's stage name is outside text
		}
		_ = rw.csv.Write(names) // an error stays in the csv.Writer, seen at flush
	}
	return rw
}

// stageColumns names stage st's three columns.
func stageColumns(st event.Stage) []string {
	s := string(st)
	return []string{s + "_ms", s + "_prov", s + "_src"}
}

func (rw *rowWriter) write(row *aggregate.RequestRow) error {
	if rw.format == RowsCSV {
		return rw.writeCSV(row)
	}
	return rw.writeJSON(row)
}

func (rw *rowWriter) writeCSV(row *aggregate.RequestRow) error {
	rw.cells = rw.cells[:0]
	for _, c := range rowColumns {
		rw.cells = append(rw.cells, csvValue(c.value(row)))
	}
	for _, st := range rw.stages {
		t, ok := row.Stage(st)
		if !ok {
			rw.cells = append(rw.cells, "", "", "")
			continue
		}
		rw.cells = append(rw.cells, strconv.FormatFloat(msOf(t.Duration), 'f', -1, 64),
			string(t.Provenance), textsafe.CSVCell(t.Source))
	}
	return rw.csv.Write(rw.cells)
}

// csvValue formats one fixed column's value; text from outside (errors,
// names) is kept from being run as a spreadsheet formula.
func csvValue(v any) string {
	switch v := v.(type) {
	case string:
		return textsafe.CSVCell(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case time.Time:
		if v.IsZero() {
			return ""
		}
		return v.Format(time.RFC3339Nano)
	default:
		return fmt.Sprint(v)
	}
}

func (rw *rowWriter) writeJSON(row *aggregate.RequestRow) error {
	b := []byte{'{'}
	add := func(key string, v any) error {
		if len(b) > 1 {
			b = append(b, ',')
		}
		k, err := json.Marshal(key) // a server's stage name is in it
		if err != nil {
			return err
		}
		enc, err := json.Marshal(v)
		if err != nil {
			return err
		}
		b = append(append(append(b, k...), ':'), enc...)
		return nil
	}
	for _, c := range rowColumns {
		if err := add(c.name, c.value(row)); err != nil {
			return err
		}
	}
	for _, st := range rw.stages {
		t, ok := row.Stage(st)
		names := stageColumns(st)
		var ms, prov, src any // null where the request has no such stage
		if ok {
			ms, prov, src = msOf(t.Duration), string(t.Provenance), t.Source
		}
		for i, v := range []any{ms, prov, src} {
			if err := add(names[i], v); err != nil {
				return err
			}
		}
	}
	b = append(b, '}', '\n')
	_, err := rw.buf.Write(textsafe.JSON(b))
	return err
}

func (rw *rowWriter) flush() error {
	if rw.csv != nil {
		rw.csv.Flush()
		if err := rw.csv.Error(); err != nil {
			return fmt.Errorf("write the rows: %w", err)
		}
	}
	if err := rw.buf.Flush(); err != nil {
		return fmt.Errorf("write the rows: %w", err)
	}
	return nil
}

// msOf is d in milliseconds at microsecond resolution.
func msOf(d time.Duration) float64 {
	return float64(d.Round(time.Microsecond)) / float64(time.Millisecond)
}
