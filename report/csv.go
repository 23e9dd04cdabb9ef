package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/internal/textsafe"
)

// CSVColumns are the columns of a single recording's CSV report.
var CSVColumns = []string{"section", "name", "statistic", "value", "unit", "provenance"}

// CSVComparisonColumns are the columns of a comparison's CSV report.
var CSVComparisonColumns = []string{"section", "name", "statistic", "unit", "base", "other", "change", "change_pct", "p_value", "significant", "windows_base", "windows_other"}

// csvRows collects rows and formats numbers one way: as many decimals as
// they need, at most three, and empty when unknown.
type csvRows [][]string

func (r *csvRows) add(section, name, stat string, v float64, unit, prov string) {
	*r = append(*r, []string{section, name, stat, csvNum(v), unit, prov})
}

func (r *csvRows) stats(section, name, unit string, st aggregate.Stats, prov string) {
	r.add(section, name, "count", float64(st.Count), "count", prov)
	if st.Count == 0 {
		return
	}
	for _, s := range []struct {
		stat string
		v    float64
	}{{"mean", st.Mean}, {"stddev", st.Stddev}, {"min", st.Min}, {"p50", st.P50}, {"p90", st.P90}, {"p95", st.P95},
		{"p99", st.P99}, {"p99_9", st.P999}, {"max", st.Max}} {
		r.add(section, name, s.stat, s.v, unit, prov)
	}
	if st.Negative > 0 { // values below zero (a residual), kept as they are
		r.add(section, name, "negative", float64(st.Negative), "count", prov)
	}
}

// boolNum is 1 for true, 0 for false.
func boolNum(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func csvNum(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return ""
	}
	return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
}

func writeCSV(w io.Writer, rec *Recording) error {
	s := &rec.Summary
	// First, whether the recording is whole: a cut-off one says so here,
	// where a spreadsheet shows it, as the other formats' banners do.
	// The value stays a number, as in every row: 1 for partial.
	var rows csvRows
	rows.add("recording", "partial", "value", boolNum(rec.Partial), "bool", "")
	rows.add("recording", "events", "value", float64(rec.Events), "events", "")
	if rec.Partial {
		rows.add("recording", "cut_at", "value", float64(rec.CutAt), "bytes", "")
	}
	if s.DuplicatesIgnored > 0 {
		rows.add("recording", "duplicates_ignored", "value", float64(s.DuplicatesIgnored), "events", "")
	}
	r := s.Requests
	for _, c := range []struct {
		name string
		v    float64
		unit string
	}{
		{"sent", float64(r.Sent), "requests"}, {"ok", float64(r.OK), "requests"}, {"errors", float64(r.Errors), "requests"},
		{"cancelled_at_end", float64(r.CancelledAtEnd), "requests"},
		{"warmup", float64(r.Warmup), "requests"}, {"tokens_out", float64(r.TokensOut), "tokens"},
		{"duration", r.Duration.Seconds(), "s"}, {"req_per_s", r.ReqPerSec, "req/s"}, {"ok_per_s", r.OKPerSec, "req/s"},
		{"tok_per_s", r.TokPerSec, "tok/s"}, {"error_rate", errorPercent(r), "%"},
	} {
		rows.add("requests", c.name, "value", c.v, c.unit, "")
	}
	rows.stats("latency", "ttft", "ms", s.TTFT, "measured")
	rows.stats("latency", "ttft_answer", "ms", s.TTFTAnswer, "measured")
	rows.stats("latency", "ttst", "ms", s.TTST, "measured")
	if r := s.Reasoning; r != nil {
		if s.Thinking != nil {
			rows.stats("latency", "thinking", "ms", *s.Thinking, "measured")
		}
		rows.add("reasoning", "requests", "value", float64(r.Requests), "requests", "")
		rows.add("reasoning", "unanswered", "value", float64(r.Unanswered), "requests", "")
		rows.add("reasoning", "reasoning_tokens", "value", float64(r.ReasoningTokens), "tokens", "")
		rows.add("reasoning", "answer_tokens", "value", float64(r.AnswerTokens), "tokens", "")
	}
	rows.stats("latency", "itl", "ms", s.ITL, "measured")
	rows.stats("latency", "tpot", "ms", s.TPOT, "measured")
	rows.stats("latency", "e2e", "ms", s.E2E, "measured")
	rows.stats("latency", "sched_lag", "ms", s.SchedLag, "measured")
	rows.stats("latency", "tok_per_s_per_request", "tok/s", s.TokensPerSec, "measured")
	if b := s.ByLength; b != nil {
		for _, part := range []struct {
			section string
			buckets []aggregate.LengthBucket
		}{{"by_prompt_length", b.Prompt}, {"by_output_length", b.Output}} {
			for _, k := range part.buckets {
				rows.stats(part.section, k.Label()+" ttft", "ms", k.TTFT, "measured")
				rows.stats(part.section, k.Label()+" tpot", "ms", k.TPOT, "measured")
				rows.stats(part.section, k.Label()+" e2e", "ms", k.E2E, "measured")
			}
		}
	}
	turnRows(&rows, s.Turns)
	if a := s.Abandoned; a != nil {
		rows.add("abandoned", "abandoned", "value", float64(a.Count), "requests", "measured")
		rows.stats("abandoned", "slot_release", "ms", a.Release, "measured")
	}
	for _, st := range event.OrderStages(event.ClientOrder(), maps.Keys(s.Stages)) {
		rows.stats("client_stage", string(st), "ms", s.Stages[st], "measured")
	}
	for _, st := range event.OrderStages(event.BreakdownOrder(), maps.Keys(s.Breakdown.Stages)) {
		bs := s.Breakdown.Stages[st]
		prov := strings.ReplaceAll(provenanceText(bs.Provenance), ", ", ";")
		rows.stats("breakdown", string(st), "ms", bs.Stats, prov)
		rows.add("breakdown", string(st), "share", 100*bs.Share, "%", prov)
	}
	for _, b := range []aggregate.BandStat{aggregate.BandMean, aggregate.BandP99} {
		band := rec.Bands[b]
		stat := b.String() + "_band"
		rows.add("band", "requests", stat, float64(band.Requests), "requests", "")
		rows.add("band", "ttft", stat, band.TTFT, "ms", "")
		for _, st := range event.OrderStages(event.BreakdownOrder(), maps.Keys(band.Stages)) {
			rows.add("band", string(st), stat, band.Stages[st], "ms", "")
		}
	}
	errorRows(&rows, s)
	serverRows(&rows, s)
	gpuRows(&rows, s)
	hostRows(&rows, s.Host)
	for _, k := range slices.Sorted(maps.Keys(s.Markers.Counts)) {
		rows.add("marker", string(k), "count", float64(s.Markers.Counts[k]), "markers", "")
	}
	for _, c := range slices.Sorted(maps.Keys(s.Markers.StallCauses)) {
		rows.add("stall_cause", string(c), "count", float64(s.Markers.StallCauses[c]), "markers", "")
	}
	sweepRows(&rows, rec.Sweep)
	return writeCSVRows(w, CSVColumns, rows)
}

func errorRows(rows *csvRows, s *aggregate.Summary) {
	r := s.Requests
	for _, k := range slices.Sorted(maps.Keys(r.ByOutcome)) {
		rows.add("error", string(k), "count", float64(r.ByOutcome[k]), "requests", "")
	}
	for _, k := range slices.Sorted(maps.Keys(r.ByStatus)) {
		rows.add("http_status", strconv.Itoa(k), "count", float64(r.ByStatus[k]), "requests", "")
	}
	for _, e := range r.TopErrors {
		rows.add("error_message", string(e.Outcome)+": "+e.Message, "count", float64(e.Count), "requests", "")
	}
}

func serverRows(rows *csvRows, s *aggregate.Summary) {
	sv := s.Server
	rows.add("server", "samples", "count", float64(sv.Samples), "count", "server")
	if sv.Samples == 0 {
		return
	}
	gauge := func(name string, g aggregate.Gauge, unit string) {
		if g.Seen {
			rows.add("server", name, "mean", g.Mean, unit, "server")
			rows.add("server", name, "peak", g.Peak, unit, "server")
			rows.add("server", name, "last", g.Last, unit, "server")
		}
	}
	gauge("queue_depth", sv.QueueDepth, "requests")
	gauge("running", sv.Running, "requests")
	gauge("kv_cache", sv.KVCache, "fraction")
	if sv.QueueDepth.Seen {
		rows.add("server", "queue_depth", "slope", sv.QueueSlope, "requests/s", "server")
	}
	for _, k := range slices.Sorted(maps.Keys(sv.StageMeans)) {
		rows.add("server_stage", k, "mean", sv.StageMeans[k], "ms", "server")
	}
}

// hostRows are the client host's figures over the run (shares 0..1; a
// figure the host never gave is left out).
func hostRows(rows *csvRows, h *aggregate.HostStats) {
	if h == nil || h.Samples == 0 {
		return
	}
	for _, f := range []struct {
		name, stat string
		v          float64
		unit       string
	}{
		{"psi_cpu_some", "mean", h.PSIMean, "fraction"}, {"psi_cpu_some", "max", h.PSIMax, "fraction"},
		{"steal", "mean", h.StealMean, "fraction"}, {"steal", "max", h.StealMax, "fraction"},
		{"run_queue", "max", float64(h.RunQueueMax), "tasks"}, {"cores", "count", float64(h.Cores), "cpus"},
		{"latscope_cpu", "mean", h.SelfCPUMean, "cores"},
		{"samples", "busy", float64(h.BusySamples), "samples"}, {"samples", "count", float64(h.Samples), "samples"},
	} {
		if f.v >= 0 {
			rows.add("host", f.name, f.stat, f.v, f.unit, "measured")
		}
	}
}

func gpuRows(rows *csvRows, s *aggregate.Summary) {
	g := s.GPU
	if g == nil || !g.Available {
		return
	}
	prov := "measured"
	if g.Simulated {
		prov = "simulated"
	}
	for _, d := range g.Devices {
		name := fmt.Sprintf("gpu%d", d.Index)
		rows.add("gpu", name, "util", float64(d.UtilGPU), "%", prov)
		rows.add("gpu", name, "mem_used", gib(d.MemUsed), "GiB", prov)
		rows.add("gpu", name, "mem_total", gib(d.MemTotal), "GiB", prov)
		rows.add("gpu", name, "power", float64(d.PowerMilliW)/1000, "W", prov)
		rows.add("gpu", name, "temperature", float64(d.TempC), "C", prov)
		rows.add("gpu", name, "sm_clock", float64(d.SMClockMHz), "MHz", prov)
	}
}

func writeCSVComparison(w io.Writer, c *Comparison) error {
	// First, whether each recording is whole, as in a single report.
	// Before anything, how the runs differ in what they measured.
	rows := make([][]string, 0, 1+len(c.Mismatches)+len(c.Changes))
	for _, m := range c.Mismatches {
		rows = append(rows, []string{"mismatch", m.Field, "value", "text", m.Base, m.Other, "", "", "", "false", "", ""})
	}
	rows = append(rows, []string{"recording", "partial", "value", "bool", csvNum(boolNum(c.Base.Partial)), csvNum(boolNum(c.Other.Partial)), "", "", "", "false", "", ""})
	for _, ch := range c.Changes {
		p := ""
		if ch.Tested() {
			p = strconv.FormatFloat(ch.P, 'g', 4, 64)
		}
		rows = append(rows, []string{ch.Section, ch.Name, ch.Stat, ch.Unit, csvNum(ch.Base), csvNum(ch.Other), csvNum(ch.Delta),
			csvNum(ch.DeltaPct), p, strconv.FormatBool(ch.Significant), strconv.Itoa(ch.Windows[0]), strconv.Itoa(ch.Windows[1])})
	}
	return writeCSVRows(w, CSVComparisonColumns, rows)
}

func writeCSVRows(w io.Writer, header []string, rows [][]string) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(header); err != nil {
		return err
	}
	// Every cell, numbers aside, is kept from running as a spreadsheet
	// formula: names and error messages come from outside.
	for _, row := range rows {
		for i, cell := range row {
			row[i] = textsafe.CSVCell(cell)
		}
	}
	if err := cw.WriteAll(rows); err != nil { // WriteAll flushes
		return err
	}
	return cw.Error()
}

// errorPercent is the share of finished requests that failed, in percent
// (requests the run's end cancelled did not finish).
func errorPercent(r aggregate.Requests) float64 {
	rate, _ := r.ErrorRate()
	return 100 * rate
}

// turnRows adds the results by conversation turn and by cached share.
func turnRows(rows *csvRows, tu *aggregate.Turns) {
	if tu == nil {
		return
	}
	for _, part := range []struct {
		section string
		rows    []aggregate.TurnRow
	}{{"by_turn", tu.ByTurn}, {"by_cached_share", tu.ByCachedShare}} {
		for _, r := range part.rows {
			rows.stats(part.section, r.Label+" ttft", "ms", r.TTFT, "measured")
			rows.add(part.section, r.Label+" cached_tokens", "mean", r.CachedTokens, "tokens", "server")
			rows.add(part.section, r.Label+" prompt_tokens", "mean", r.PromptTokens, "tokens", "server")
			rows.add(part.section, r.Label+" ttft_per_uncached_token", "value", r.TTFTPerUncached, "ms", "estimated")
		}
	}
	rows.add("prefix_cache", "hit_rate", "value", tu.HitRate, "ratio", "server")
	if tu.ServerHitRate != nil {
		rows.add("prefix_cache", "server_hit_rate", "value", *tu.ServerHitRate, "ratio", "server")
	}
}
