package report

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// table is one section of a report, independent of the format: Markdown
// prints it as a pipe table, HTML as a <table>. A table without columns is
// a bulleted list of its Items.
type table struct {
	Title   string
	Columns []string
	Rows    [][]string
	Items   []string
	Notes   []string // lines under the table
	// Strong marks rows to stand out (a significant change); HTML shows
	// them in bold.
	Strong []bool
	// Text says the cells are text, to align left even when they are numbers.
	Text bool
}

// overview describes the session: what was measured, how, and when.
func overview(rec *Recording) [][2]string {
	s := rec.Summary
	var rows [][2]string
	add := func(label, value string) {
		if value != "" {
			rows = append(rows, [2]string{label, value})
		}
	}
	add("File", rec.Path)
	if h := s.Session; h != nil {
		add("Session", h.Name)
		add("Region", h.Region)
		add("Shard", h.Shard)
		add("Target", h.Target)
		server := h.Server
		if h.Dialect != "" {
			server = strings.TrimPrefix(server+", dialect "+h.Dialect, ", ")
		}
		add("Server", server)
		add("Model", h.Model)
		add("Load", describeLoad(h.Load))
		if !h.Time.IsZero() {
			add("Started", h.Time.UTC().Format("2006-01-02 15:04:05 MST"))
		}
		add("Recorded by", strings.TrimSpace(fmt.Sprintf("latscope %s %s", h.Latscope, onHost(h.Host))))
		add("Run", h.RunID)
	}
	add("Duration", fmt.Sprintf("%.2f s, first send to last completion", s.Duration.Seconds()))
	add("Events", strconv.FormatInt(rec.Events, 10))
	return rows
}

func onHost(host string) string {
	if host == "" {
		return ""
	}
	return "on " + host
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// describeLoad says in a line what load the session asked for.
func describeLoad(l event.Load) string {
	var parts []string
	switch l.Mode {
	case "open":
		p := fmt.Sprintf("open loop, %g req/s", l.Rate)
		if l.Arrival != "" {
			p += " " + l.Arrival
		}
		parts = append(parts, p)
	case "closed":
		parts = append(parts, "closed loop, "+counted(l.Concurrency, "stream", "streams"))
	case "":
	case "sweep":
		p := "sweep"
		if l.Arrival != "" {
			p += ", " + l.Arrival + " arrivals"
		}
		parts = append(parts, p)
	default:
		parts = append(parts, l.Mode)
	}
	if l.PromptTokens != "" {
		parts = append(parts, "prompt "+l.PromptTokens+" tokens")
	}
	if l.OutputTokens != "" {
		parts = append(parts, "output "+l.OutputTokens+" tokens")
	}
	if l.Duration > 0 {
		parts = append(parts, "for "+l.Duration.String())
	}
	if l.Requests > 0 {
		parts = append(parts, counted(l.Requests, "request", "requests"))
	}
	if l.Warmup > 0 {
		parts = append(parts, fmt.Sprintf("%d warm-up", l.Warmup))
	}
	if l.SLO != "" {
		parts = append(parts, "SLO "+l.SLO)
	}
	return strings.Join(parts, ", ")
}

var statColumns = []string{"count", "mean", "stddev", "min", "p50", "p90", "p95", "p99", "p99.9", "max"}

func statCells(st aggregate.Stats) []string {
	return []string{strconv.FormatInt(st.Count, 10), num(st.Mean, 2), num(st.Stddev, 2), num(st.Min, 2), num(st.P50, 2), num(st.P90, 2),
		num(st.P95, 2), num(st.P99, 2), num(st.P999, 2), num(st.Max, 2)}
}

// sections are a recording's tables, in the order a report shows them.
func sections(rec *Recording) []table {
	s := &rec.Summary
	var out []table
	if rec.Sweep != nil {
		out = append(out, sweepTable(rec.Sweep))
	}
	if s.Traffic != nil {
		out = append(out, trafficTables(s.Traffic)...)
	}
	out = append(out, requestsTable(s), latencyTable(s))
	out = append(out, byLengthTables(s.ByLength)...)
	out = append(out, turnTables(s.Turns)...)
	if s.Abandoned != nil {
		out = append(out, abandonedTable(s.Abandoned))
	}
	if t, ok := objectivesTable(s); ok {
		out = append(out, t)
	}
	if len(s.Stages) > 0 {
		out = append(out, clientStagesTable(s))
	}
	out = append(out, breakdownTable(s, &rec.Bands))
	out = append(out, errorTables(s)...)
	out = append(out, serverTables(s)...)
	out = append(out, gpuTable(s.GPU))
	if s.Host != nil {
		out = append(out, hostTable(s.Host))
	}
	out = append(out, markerTables(s)...)
	return out
}

func requestsTable(s *aggregate.Summary) table {
	r := s.Requests
	errRate := "-"
	if rate, ok := r.ErrorRate(); ok {
		errRate = num(100*rate, 2) + "%"
	}
	t := table{
		Title:   "Requests and throughput",
		Columns: []string{"sent", "ok", "errors", "error rate", "cancelled at the end", "warm-up (excluded)", "req/s finished", "req/s ok", "output tok/s", "output tokens"},
		Rows: [][]string{{
			strconv.FormatInt(r.Sent, 10), strconv.FormatInt(r.OK, 10), strconv.FormatInt(r.Errors, 10), errRate, strconv.FormatInt(r.CancelledAtEnd, 10),
			strconv.FormatInt(r.Warmup, 10), num(r.ReqPerSec, 2), num(r.OKPerSec, 2), num(r.TokPerSec, 2), strconv.FormatInt(r.TokensOut, 10),
		}},
	}
	if s.Traffic != nil {
		t.Title = "The canary's requests (latscope's own) and throughput"
	}
	if r.Abandoned > 0 {
		t.Notes = append(t.Notes, fmt.Sprintf("%s abandoned by the probe on purpose (--cancel-after): not errors, not finished, and out of the latency statistics.",
			counted(r.Abandoned, "request", "requests")))
	}
	if len(r.Flags) > 0 {
		var parts []string
		for _, f := range slices.Sorted(maps.Keys(r.Flags)) {
			parts = append(parts, fmt.Sprintf("%s %d", f, r.Flags[f]))
		}
		t.Notes = append(t.Notes, "Flags: "+strings.Join(parts, ", "))
	}
	if r.Clamped > 0 || r.DroppedStages > 0 {
		t.Notes = append(t.Notes, fmt.Sprintf("%s clamped at ±10 min (the histograms' range), %s dropped (too many stage names)", counted(r.Clamped, "value", "values"), counted(r.DroppedStages, "stage value", "stage values")))
	}
	return t
}

func latencyTable(s *aggregate.Summary) table {
	t := table{Title: "Latency (ms)", Columns: append([]string{"metric"}, statColumns...)}
	row := func(name string, st aggregate.Stats) {
		t.Rows = append(t.Rows, append([]string{name}, statCells(st)...))
	}
	row("ttft", s.TTFT)
	if r := s.Reasoning; r != nil {
		row("ttft_answer", s.TTFTAnswer)
		if s.Thinking != nil {
			row("thinking", *s.Thinking)
		}
		row("ttst", s.TTST)
	}
	row("itl", s.ITL)
	row("tpot", s.TPOT)
	row("e2e", s.E2E)
	row("sched_lag", s.SchedLag)
	row("tok/s per request *", s.TokensPerSec)
	t.Notes = []string{"* in output tokens per second, not ms. Latencies come from successful requests; TTFT and E2E count from the intended send time."}
	if r := s.Reasoning; r != nil {
		t.Notes = append(t.Notes, fmt.Sprintf("A reasoning model: %s thought first (%d never answered), %s and %s. "+
			"ttft is the first token of any kind, ttft_answer the first answer token, thinking the time between them, ttst the time to the second token. "+
			"%s is what the TTFT breakdown and the objectives use.",
			counted(r.Requests, "request", "requests"), r.Unanswered, counted(r.ReasoningTokens, "reasoning token", "reasoning tokens"),
			counted(r.AnswerTokens, "answer token", "answer tokens"), aggregate.TTFTLabel(s.TTFTBasis, true)))
	}
	return t
}

// byLengthTables are the results by prompt and by output length, for each
// of the two that has more than one bucket.
func byLengthTables(b *aggregate.ByLength) []table {
	if b.Empty() {
		return nil
	}
	var out []table
	for _, part := range []struct {
		what    string
		buckets []aggregate.LengthBucket
	}{{"prompt", b.Prompt}, {"output", b.Output}} {
		if len(part.buckets) < 2 {
			continue
		}
		t := table{Title: "By " + part.what + " length (ms)",
			Columns: []string{part.what + " tokens", "count", "ttft p50", "ttft p90", "ttft p99", "tpot p50", "tpot p99", "e2e p50", "e2e p99"},
			Notes:   []string{"Successful requests, in buckets that double in length; a long prompt's tail hides in the overall p99 when most prompts are short."}}
		for _, k := range part.buckets {
			t.Rows = append(t.Rows, []string{k.Label(), strconv.FormatInt(k.Count, 10), num(k.TTFT.P50, 2), num(k.TTFT.P90, 2), num(k.TTFT.P99, 2),
				num(k.TPOT.P50, 2), num(k.TPOT.P99, 2), num(k.E2E.P50, 2), num(k.E2E.P99, 2)})
		}
		out = append(out, t)
	}
	return out
}

func clientStagesTable(s *aggregate.Summary) table {
	t := table{Title: "Client stages (ms, measured)", Columns: append([]string{"stage"}, statColumns...)}
	for _, st := range event.OrderStages(event.ClientOrder(), maps.Keys(s.Stages)) {
		t.Rows = append(t.Rows, append([]string{string(st)}, statCells(s.Stages[st])...))
	}
	return t
}

func breakdownTable(s *aggregate.Summary, bands *[aggregate.NumBands]aggregate.Band) table {
	b := s.Breakdown
	if b.Requests == 0 {
		return table{Title: "TTFT breakdown", Notes: []string{"No breakdown: no server data was joined to the requests."}}
	}
	mean, slow := bands[aggregate.BandMean], bands[aggregate.BandP99]
	t := table{
		Title:   "TTFT breakdown (ms, " + counted(b.Requests, "request", "requests") + ")",
		Columns: []string{"stage", "provenance", "count", "mean", "p50", "p90", "p99", "share", "mean band", "slowest 1% band"},
	}
	for _, st := range event.OrderStages(event.BreakdownOrder(), maps.Keys(b.Stages), maps.Keys(mean.Stages), maps.Keys(slow.Stages)) {
		bs := b.Stages[st]
		t.Rows = append(t.Rows, []string{
			string(st), bs.ProvenanceText(), strconv.FormatInt(bs.Count, 10), num(bs.Mean, 2), num(bs.P50, 2),
			num(bs.P90, 2), num(bs.P99, 2), num(100*bs.Share, 1) + "%", num(mean.Stages[st], 2), num(slow.Stages[st], 2),
		})
	}
	t.Rows = append(t.Rows, []string{"TTFT (band total)", "", "", "", "", "", "", "", num(mean.TTFT, 2), num(slow.TTFT, 2)})
	unattributed := fmt.Sprintf("Unattributed: %.1f%% of TTFT (time no source accounts for; negative means the sources disagree).", 100*b.UnattributedShare)
	if u := b.Stages[event.StageUnattributed]; u.Negative > 0 {
		unattributed += fmt.Sprintf(" Negative on %d of %s, shown as they are.", u.Negative, counted(u.Count, "request", "requests"))
	}
	t.Notes = []string{
		unattributed,
		fmt.Sprintf("Bands: the mean breakdown of every request (%d) and of the slowest 1%% by TTFT (%s, TTFT %.2f-%.2f ms); a band's stages add up to its TTFT, unlike per-stage percentiles.",
			mean.Requests, counted(slow.Requests, "request", "requests"), slow.MinTTFT, slow.MaxTTFT),
		"Provenance: measured (latscope's clock), server (reported by the server), estimated (derived by latscope); a stage is marked by the provenance of most of its values (or mixed), with the counts when they differ.",
		"Server wait: the server's front end and queue, not told apart; latscope calls it queue only where the server reported a queue or its queue gauge showed requests waiting.",
	}
	return t
}

func provenanceText(ps []event.Provenance) string {
	words := make([]string, len(ps))
	for i, p := range ps {
		words[i] = string(p)
	}
	return strings.Join(words, ", ")
}

func errorTables(s *aggregate.Summary) []table {
	r := s.Requests
	if r.Errors == 0 {
		return []table{{Title: "Errors", Notes: []string{"No request failed."}}}
	}
	kinds := table{Title: "Errors by kind", Columns: []string{"outcome", "count", "share of sent"}}
	for _, k := range slices.Sorted(maps.Keys(r.ByOutcome)) {
		kinds.Rows = append(kinds.Rows, []string{string(k), strconv.FormatInt(r.ByOutcome[k], 10), num(percent(r.ByOutcome[k], r.Sent), 2) + "%"})
	}
	out := []table{kinds}
	if len(r.ByStatus) > 0 {
		st := table{Title: "Errors by HTTP status", Columns: []string{"status", "count"}}
		for _, k := range slices.Sorted(maps.Keys(r.ByStatus)) {
			st.Rows = append(st.Rows, []string{strconv.Itoa(k), strconv.FormatInt(r.ByStatus[k], 10)})
		}
		out = append(out, st)
	}
	if len(r.TopErrors) > 0 {
		top := table{Title: "Top error messages", Columns: []string{"count", "outcome", "message"}}
		for _, e := range r.TopErrors {
			top.Rows = append(top.Rows, []string{strconv.FormatInt(e.Count, 10), string(e.Outcome), e.Message})
		}
		out = append(out, top)
	}
	return out
}

func serverTables(s *aggregate.Summary) []table {
	sv := s.Server
	if sv.Samples == 0 {
		return []table{{Title: "Server", Notes: []string{"No server metrics were collected."}}}
	}
	g := table{
		Title:   fmt.Sprintf("Server (%s, %s): %s", orDash(sv.Dialect), orDash(sv.Source), counted(sv.Samples, "sample", "samples")),
		Columns: []string{"gauge", "mean (time-weighted)", "peak", "last"},
	}
	gauge := func(name string, v aggregate.Gauge, scale float64, unit string) {
		if v.Seen {
			g.Rows = append(g.Rows, []string{name, num(v.Mean*scale, 2) + unit, num(v.Peak*scale, 2) + unit, num(v.Last*scale, 2) + unit})
		}
	}
	gauge("queue depth (waiting)", sv.QueueDepth, 1, "")
	gauge("running", sv.Running, 1, "")
	gauge("KV cache", sv.KVCache, 100, "%")
	if sv.QueueDepth.Seen {
		g.Notes = append(g.Notes, fmt.Sprintf("Queue depth trend over the last minute: %+.2f requests/s.", sv.QueueSlope))
	}
	if sv.Stale > 0 {
		g.Notes = append(g.Notes, counted(sv.Stale, "sample was", "samples were")+" stale (a scrape failed and the last values were repeated).")
	}
	if sv.LastError != "" {
		g.Notes = append(g.Notes, "Last scrape error: "+sv.LastError)
	}
	out := []table{g}
	if len(sv.StageMeans) > 0 {
		st := table{Title: "Server stage means (ms, server-reported, count-weighted)", Columns: []string{"stage", "mean"}}
		for _, k := range slices.Sorted(maps.Keys(sv.StageMeans)) {
			st.Rows = append(st.Rows, []string{k, num(sv.StageMeans[k], 2)})
		}
		out = append(out, st)
	}
	return out
}

func gpuTable(g *event.GPUSample) table {
	t := table{Title: "GPU (latest sample)"}
	switch {
	case g == nil:
		t.Notes = []string{"No GPU samples."}
		return t
	case !g.Available:
		t.Notes = []string{"GPU unavailable: " + orDash(g.Reason)}
		return t
	}
	if g.Simulated {
		t.Title = "GPU (latest sample) - SIMULATED"
		t.Notes = []string{"SIMULATED: this GPU was invented by latscope's demo from the simulator's batch; it is not a real device."}
	}
	t.Columns = []string{"index", "name", "util", "memory", "power", "temperature", "SM clock", "throttle"}
	for _, d := range g.Devices {
		t.Rows = append(t.Rows, []string{
			strconv.Itoa(d.Index), d.Name, fmt.Sprintf("%d%%", d.UtilGPU),
			fmt.Sprintf("%.1f / %.1f GiB", gib(d.MemUsed), gib(d.MemTotal)),
			fmt.Sprintf("%.0f W", float64(d.PowerMilliW)/1000), fmt.Sprintf("%d C", d.TempC),
			fmt.Sprintf("%d MHz", d.SMClockMHz), strings.Join(d.ThrottleReason, ", "),
		})
	}
	return t
}

// hostTable is the client host's CPU pressure over the run: the machine
// latscope ran on, whose delays are in every timing.
func hostTable(h *aggregate.HostStats) table {
	t := table{Title: "Client host (the machine latscope ran on)"}
	if h.Samples == 0 {
		t.Notes = []string{orDash(h.Line())}
		return t
	}
	pct := func(x float64) string {
		if x < 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f%%", 100*x)
	}
	t.Columns = []string{"samples", "busy", "PSI cpu some mean", "PSI cpu some max", "steal mean", "run queue max", "cores", "latscope CPU (of a core)"}
	t.Rows = [][]string{{strconv.FormatInt(h.Samples, 10), strconv.FormatInt(h.BusySamples, 10), pct(h.PSIMean), pct(h.PSIMax),
		pct(h.StealMean), strconv.Itoa(h.RunQueueMax), strconv.Itoa(h.Cores), pct(h.SelfCPUMean)}}
	t.Notes = []string{h.Line()}
	if h.BusyAtStart {
		t.Notes = append(t.Notes, "The client host was busy when the run started: timings include its delays.")
	}
	if h.Saturated() {
		t.Notes = append(t.Notes, "The client host was saturated for part of the run: pauses in those stretches are its own, not the server's.")
	}
	return t
}

func gib(b uint64) float64 { return float64(b) / (1 << 30) }

// maxMarkers bounds the markers a report lists.
const maxMarkers = 20

func markerTables(s *aggregate.Summary) []table {
	m := s.Markers
	var out []table
	if len(m.Counts) > 0 {
		t := table{Title: "Markers", Columns: []string{"time", "kind", "source", "message"},
			Notes: []string{"Counts: " + m.CountsText()}}
		runs := aggregate.FoldStalls(m.Recent)
		recent := runs[max(0, len(runs)-maxMarkers):]
		shown := 0
		for _, x := range recent {
			msg := x.Message
			if x.Count > 1 {
				msg = fmt.Sprintf("×%d since %s · %s", x.Count, markerTime(x.First, s), msg)
			}
			t.Rows = append(t.Rows, []string{markerTime(x.Time, s), string(x.Kind), x.Source, msg})
			shown += x.Count
		}
		if shown < len(m.Recent) || int64(len(m.Recent)) < sum(m.Counts) {
			t.Notes = append(t.Notes, fmt.Sprintf("Showing the latest %d.", shown))
		}
		out = append(out, t)
	}
	ins := table{Title: "Insights"}
	for _, x := range s.Insights {
		ins.Items = append(ins.Items, x.Message)
	}
	if len(ins.Items) == 0 {
		ins.Notes = []string{"None: no insight's threshold was crossed (or too few requests to say)."}
	}
	return append(out, ins)
}

// markerTime shows a marker's time of day and its offset into the session.
func markerTime(t time.Time, s *aggregate.Summary) string {
	at := t.UTC().Format("15:04:05.000")
	if h := s.Session; h != nil && !h.Time.IsZero() {
		at += fmt.Sprintf(" (+%.1f s)", t.Sub(h.Time).Seconds())
	}
	return at
}

func sum[K comparable](m map[K]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// turnTables are the results by conversation turn and by cached share.
func turnTables(tu *aggregate.Turns) []table {
	if tu == nil {
		return nil
	}
	var out []table
	for _, part := range []struct {
		title, col, note string
		rows             []aggregate.TurnRow
	}{
		{"By conversation turn (ms)", "turn", "Successful requests by their turn in a conversation (--conversation): each turn's prompt holds the conversation so far, so a prefix cache that keeps hitting keeps TTFT per uncached token flat.", tu.ByTurn},
		{"By cached share of the prompt (ms)", "cached share", "Successful requests by the share of their prompt the server reported from its prefix cache.", tu.ByCachedShare},
	} {
		if len(part.rows) == 0 {
			continue
		}
		t := table{Title: part.title, Notes: []string{part.note},
			Columns: []string{part.col, "count", "prompt tokens", "cached tokens", "cached", "ttft p50", "ttft p90", "ttft p99", "ttft per uncached token", "prefill per uncached token"}}
		for _, r := range part.rows {
			prefill := "-"
			if r.PrefillPerUncached != nil {
				prefill = num(*r.PrefillPerUncached, 4)
			}
			t.Rows = append(t.Rows, []string{r.Label, strconv.FormatInt(r.Count, 10), num(r.PromptTokens, 0), num(r.CachedTokens, 0),
				num(100*r.CachedShare, 1) + "%", num(r.TTFT.P50, 2), num(r.TTFT.P90, 2), num(r.TTFT.P99, 2), num(r.TTFTPerUncached, 4), prefill})
		}
		if tu.CacheReported == 0 {
			t.Notes = append(t.Notes, "No request had cached tokens reported: a server that never says looks like a cache that never hits.")
		}
		out = append(out, t)
	}
	return append(out, cacheSeriesTable(tu))
}

// cacheSeriesTable is the prefix cache's hit rate and the TTFT over time.
func cacheSeriesTable(tu *aggregate.Turns) table {
	t := table{Title: "Prefix cache over time", Notes: []string{aggregate.CacheRateLine(tu),
		"Hit rate: cached over prompt tokens of the successful requests that ended in the interval, as the server reported them per request; server hit rate: its prefix-cache counters' hits over queries in the interval. A cache that evicts shows as the hit rate falling while TTFT rises."},
		Columns: []string{"from (s)", "requests", "hit rate", "server hit rate", "ttft mean (ms)", "ttft per uncached token (ms)"}}
	for _, p := range tu.Series {
		t.Rows = append(t.Rows, []string{num(p.StartS, 0), strconv.FormatInt(p.Requests, 10), aggregate.FmtOpt("%.1f%%", p.HitRate, 100),
			aggregate.FmtOpt("%.1f%%", p.ServerHitRate, 100), aggregate.FmtOpt("%.2f", p.TTFTMean, 1), aggregate.FmtOpt("%.4f", p.TTFTPerUncached, 1)})
	}
	return t
}

// abandonedTable is the requests the probe abandoned and their slots'
// release.
func abandonedTable(a *aggregate.Abandoned) table {
	t := table{Title: "Abandoned requests and slot release (ms)", Columns: append([]string{"figure"}, statColumns...),
		Notes: aggregate.AbandonedLines(a)}
	if a.Measured() > 0 {
		t.Rows = append(t.Rows, append([]string{"slot release"}, statCells(a.Release)...))
	}
	return t
}
