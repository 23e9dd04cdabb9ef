package report

import (
	"bytes"
	"encoding/csv"
	"slices"
	"strconv"
	"testing"
	"time"
)

func readCSV(t *testing.T, b []byte) (header []string, rows map[[3]string][]string) {
	t.Helper()
	r := csv.NewReader(bytes.NewReader(b))
	all, err := r.ReadAll() // also checks every row has the header's field count
	if err != nil {
		t.Fatalf("not CSV: %v", err)
	}
	rows = make(map[[3]string][]string)
	for _, row := range all[1:] {
		key := [3]string{row[0], row[1], row[2]}
		if _, dup := rows[key]; dup {
			t.Errorf("two rows for %v", key)
		}
		rows[key] = row
	}
	return all[0], rows
}

func TestCSVHasTheDocumentedColumns(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if err := Write(&buf, CSV, defaultSynth(1).load(t)); err != nil {
		t.Fatal(err)
	}
	header, rows := readCSV(t, buf.Bytes())
	if !slices.Equal(header, CSVColumns) {
		t.Fatalf("header %v, want %v", header, CSVColumns)
	}
	for key, row := range rows {
		if _, err := strconv.ParseFloat(row[3], 64); err != nil {
			t.Errorf("%v: value %q is not a number", key, row[3])
		}
	}
	for _, tc := range []struct {
		key        [3]string
		value      string
		unit, prov string
	}{
		{[3]string{"requests", "sent", "value"}, "600", "requests", ""},
		{[3]string{"requests", "error_rate", "value"}, "2.5", "%", ""},
		{[3]string{"latency", "ttft", "count"}, "585", "count", "measured"},
		{[3]string{"latency", "itl", "count"}, "18135", "count", "measured"},
		{[3]string{"breakdown", "queue", "count"}, "585", "count", "server"},
		{[3]string{"breakdown", "network_out", "mean"}, "0.04", "ms", "estimated"},
		{[3]string{"error", "http_status", "count"}, "15", "requests", ""},
		{[3]string{"http_status", "503", "count"}, "15", "requests", ""},
		{[3]string{"error_message", "http_status: 503 Service Unavailable: upstream overloaded", "count"}, "15", "requests", ""},
		{[3]string{"server", "samples", "count"}, "61", "count", "server"},
		{[3]string{"server", "running", "peak"}, "8", "requests", "server"},
		{[3]string{"gpu", "gpu0", "util"}, "90", "%", "simulated"},
		{[3]string{"marker", "stall", "count"}, "1", "markers", ""},
		{[3]string{"stall_cause", "front_end_block", "count"}, "1", "markers", ""},
	} {
		row, ok := rows[tc.key]
		if !ok {
			t.Errorf("no row %v", tc.key)
			continue
		}
		if row[3] != tc.value || row[4] != tc.unit || row[5] != tc.prov {
			t.Errorf("%v: %v, want value %s unit %s provenance %s", tc.key, row, tc.value, tc.unit, tc.prov)
		}
	}
	for _, key := range [][3]string{
		{"latency", "ttft", "p99"}, {"latency", "tok_per_s_per_request", "mean"}, {"client_stage", "first_token", "p50"},
		{"breakdown", "queue", "share"}, {"band", "ttft", "p99_band"}, {"band", "queue", "mean_band"},
		{"server", "queue_depth", "mean"}, {"server_stage", "queue", "mean"},
	} {
		if _, ok := rows[key]; !ok {
			t.Errorf("no row %v", key)
		}
	}
}

func TestCSVComparison(t *testing.T) {
	t.Parallel()
	slow := defaultSynth(14)
	slow.queueMean = 90 * time.Millisecond
	var buf bytes.Buffer
	if err := WriteComparison(&buf, CSV, compare(t, defaultSynth(13).load(t), slow.load(t))); err != nil {
		t.Fatal(err)
	}
	header, rows := readCSV(t, buf.Bytes())
	if !slices.Equal(header, CSVComparisonColumns) {
		t.Fatalf("header %v, want %v", header, CSVComparisonColumns)
	}
	q := rows[[3]string{"breakdown", "queue", "mean"}]
	if q == nil || q[3] != "ms" || q[9] != "true" || q[10] != "11" {
		t.Errorf("queue row: %v", q)
	}
	if p, err := strconv.ParseFloat(q[8], 64); err != nil || p >= 0.001 {
		t.Errorf("queue p-value %q", q[8])
	}
	if pre := rows[[3]string{"breakdown", "prefill", "mean"}]; pre == nil || pre[9] != "false" {
		t.Errorf("prefill row: %v", pre)
	}
}
