package report

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/internal/textsafe/hostile"
)

// The per-request rows hold every request once, and the TTFT percentiles a
// user computes from them (the rows with outcome ok, not warm-up) are the
// summary's, within its histogram's precision.
func TestRequestRowsAgreeWithTheSummary(t *testing.T) {
	t.Parallel()
	s := defaultSynth(3)
	path := s.record(t, t.TempDir())
	rec, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := WriteRequests(context.Background(), &out, RowsJSONL, path, path); err != nil {
		t.Fatal(err)
	}
	var ttfts []float64
	rows := 0
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("line %d is not JSON: %v", rows+1, err)
		}
		rows++
		if row["outcome"] == "ok" && row["warmup"] == false {
			ttfts = append(ttfts, row["ttft_ms"].(float64))
		}
		if _, ok := row["queue_ms"]; !ok {
			t.Fatalf("row has no queue_ms: %v", row)
		}
	}
	sum := rec.Summary
	if int64(rows) != sum.Requests.Sent || int64(len(ttfts)) != sum.TTFT.Count {
		t.Fatalf("%d rows (%d ok), summary sent %d, ttft count %d", rows, len(ttfts), sum.Requests.Sent, sum.TTFT.Count)
	}
	slices.Sort(ttfts)
	rank := func(p float64) float64 { return ttfts[max(int(p*float64(len(ttfts))+0.5), 1)-1] }
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"p50", rank(0.5), sum.TTFT.P50}, {"p99", rank(0.99), sum.TTFT.P99}} {
		if math.Abs(c.got-c.want) > c.want*0.001+0.001 {
			t.Errorf("TTFT %s from the rows %v, the summary's %v", c.name, c.got, c.want)
		}
	}
}

// CSV and JSON lines carry the same columns and values; outside text
// (errors, names, a server's own stage names) reaches neither raw.
func TestRequestRowsCSVMatchesJSONLinesAndIsSafe(t *testing.T) {
	t.Parallel()
	s := defaultSynth(4)
	s.duration = 5e9
	evs := s.events()
	bad := hostile.Joined() + "=HYPERLINK(\"x\")"
	for _, ev := range evs {
		if r := ev.Request; r != nil && !r.OK() {
			r.Error = bad
		}
		if r := ev.Request; r != nil && r.OK() {
			r.Breakdown = append(r.Breakdown, event.StageTiming{Stage: event.Stage("st:" + bad), Provenance: event.ServerReported, Source: bad})
		}
	}
	s.header = func(h *event.Session) { h.Name = bad }
	path := writeRecording(t, t.TempDir(), "hostile.zst", s.sessionHeader(), evs, 50)
	var jl, cs bytes.Buffer
	for f, buf := range map[RowFormat]*bytes.Buffer{RowsJSONL: &jl, RowsCSV: &cs} {
		if err := WriteRequests(context.Background(), buf, f, path, path); err != nil {
			t.Fatal(err)
		}
		if leaks := hostile.Leaks(buf.String(), hostile.Terminal); len(leaks) > 0 {
			t.Errorf("%s export leaks %v", f, leaks)
		}
		if i := strings.IndexAny(buf.String(), "\x1b\x07\u009b"); i >= 0 {
			t.Errorf("%s export holds a control byte at %d", f, i)
		}
	}
	records, err := csv.NewReader(&cs).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	header, lines := records[0], records[1:]
	jlines := strings.Split(strings.TrimSpace(jl.String()), "\n")
	if len(lines) != len(jlines) {
		t.Fatalf("%d CSV rows, %d JSON lines", len(lines), len(jlines))
	}
	for i, line := range lines {
		var obj map[string]any
		if err := json.Unmarshal([]byte(jlines[i]), &obj); err != nil {
			t.Fatal(err)
		}
		if len(obj) != len(header) {
			t.Fatalf("row %d: %d JSON keys, %d CSV columns", i, len(obj), len(header))
		}
		for j, name := range header {
			if strings.HasPrefix(line[j], "=") {
				t.Errorf("row %d column %s starts a formula: %q", i, name, line[j])
			}
			if v, ok := obj[name].(float64); ok {
				if got, err := strconv.ParseFloat(line[j], 64); err != nil || got != v {
					t.Errorf("row %d column %s: CSV %q, JSON %v", i, name, line[j], v)
				}
			}
		}
	}
}
