package aggregate

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/latscope/latscope/event"
)

// ordered returns m's keys: those in canonical first, in its order, then the
// rest sorted.
func ordered[V any](m map[event.Stage]V, canonical []event.Stage) []event.Stage {
	out := make([]event.Stage, 0, len(m))
	known := make(map[event.Stage]bool, len(canonical))
	for _, s := range canonical {
		known[s] = true
		if _, ok := m[s]; ok {
			out = append(out, s)
		}
	}
	for _, s := range sortedKeys(m) {
		if !known[s] {
			out = append(out, s)
		}
	}
	return out
}

// WriteTable prints s as a human-readable report: latency percentiles per
// metric and stage (milliseconds, 2 decimals), throughput, errors, the TTFT
// breakdown with provenance, the server, the GPU, markers and insights. A
// watch's summary (Traffic set) is printed as WriteWatchTable prints it.
func WriteTable(w io.Writer, s Summary) error {
	if s.Traffic != nil {
		// A session that watched a server's own traffic (latscope watch,
		// agent --watch, their recordings): its summary is the watch's.
		return WriteWatchTable(w, s)
	}
	tw := &errWriter{w: w}
	writeRequests(tw, s)
	writeLatency(tw, s)
	if !s.ByLength.Empty() {
		writeByLength(tw, s.ByLength)
	}
	writeTurns(tw, s.Turns)
	if lines := AbandonedLines(s.Abandoned); len(lines) > 0 {
		tw.printf("\n%s\n", strings.Join(lines, "\n"))
	}
	tw.printf("\nProbe: %s\n", s.Verdict.VerdictText())
	writeHost(tw, s.Host)
	writeBreakdown(tw, s.Breakdown)
	writeServer(tw, s.Server)
	writeGPU(tw, s.GPU)
	writeMarkers(tw, s.Markers, s.Insights)
	writeLost(tw, s.Lost)
	writeIncomplete(tw, s.Unrecorded, "Recording incomplete: %d events are missing from the recording")
	writeIncomplete(tw, s.Unexported, "OTLP export incomplete: %d spans did not reach the collector")
	if s.DuplicatesIgnored > 0 {
		tw.printf("\n%s\n", DuplicatesNote(s.DuplicatesIgnored))
	}
	if tw.err != nil {
		return fmt.Errorf("write the summary: %w", tw.err)
	}
	return nil
}

// writeHost prints the client host's line, and whether the run started on
// an already busy host.
func writeHost(w *errWriter, h *HostStats) {
	if h == nil {
		return
	}
	if l := h.Line(); l != "" {
		w.printf("%s\n", strings.ToUpper(l[:1])+l[1:])
	}
	if h.BusyAtStart {
		w.printf("The client host was busy when the run started: timings include its delays.\n")
	}
}

// writeLost says how many events never reached this summary (an attached
// agent's ring no longer held them), so a gap is never silent.
func writeLost(w *errWriter, lost map[string]int64) {
	if len(lost) == 0 {
		return
	}
	var parts []string
	for _, k := range sortedKeys(lost) {
		parts = append(parts, fmt.Sprintf("%s %d", k, lost[k]))
	}
	w.printf("\nLost events (not in these figures): %s\n", strings.Join(parts, ", "))
}

// writeIncomplete says how much of the run an output misses, and why: the
// recording's missing events, the spans the OTLP collector never got.
// format takes the count.
func writeIncomplete(w *errWriter, u *Unrecorded, format string) {
	if u == nil {
		return
	}
	w.printf("\n"+format, u.Events)
	if u.Reason != "" {
		w.printf(": %s", u.Reason)
	}
	w.printf("\n")
}

// errWriter keeps the first write error so the sections need not check each line.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return len(p), nil
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, nil
}

func (e *errWriter) printf(format string, args ...any) { fmt.Fprintf(e, format, args...) }

// writeHTTP2 is the HTTP/2 line: connections (and how many were asked
// for, from the session's header), streams, flow-control stalls, retries.
func writeHTTP2(w *errWriter, h *HTTP2, sess *event.Session) {
	asked := ""
	if sess != nil && sess.Load.Connections > 0 {
		asked = fmt.Sprintf(" (%d asked)", sess.Load.Connections)
	}
	w.printf("HTTP/2: %d connections opened%s, %d streams (%.1f per connection); flow-control stalls: %d waiting for the server's window (%.2f ms), %d the server waited for the client's (%.2f ms); %d requests sent again after a GOAWAY\n",
		h.Connections, asked, h.Streams, h.PerConnection,
		h.SendStalls, h.SendStallWait.Seconds()*1e3, h.RecvStalls, h.RecvStallWait.Seconds()*1e3, h.GoAwayRetries)
}

func writeRequests(w *errWriter, s Summary) {
	r := s.Requests
	w.printf("Requests: %d sent, %d ok, %d errors", r.Sent, r.OK, r.Errors)
	if rate, ok := r.ErrorRate(); ok {
		w.printf(" (%.2f%%)", 100*rate)
	}
	if r.CancelledAtEnd > 0 {
		w.printf(", %d cancelled at the end of the run", r.CancelledAtEnd)
	}
	if r.Abandoned > 0 {
		w.printf(", %d abandoned (closed by the probe on purpose; not errors)", r.Abandoned)
	}
	w.printf("; %d warm-up excluded\n", r.Warmup)
	w.printf("Duration: %.2f s   Rate: %.2f req/s finished   Throughput: %.2f req/s ok, %.2f output tok/s (%d tokens)\n",
		s.Duration.Seconds(), r.ReqPerSec, r.OKPerSec, r.TokPerSec, r.TokensOut)
	if r.Reconnects > 0 || r.Backoffs > 0 {
		w.printf("Connections: %d requests sent again on a fresh connection (the server had closed the kept-alive one; not errors), %d back-off pauses\n",
			r.Reconnects, r.Backoffs)
	}
	if h := r.HTTP2; h != nil {
		writeHTTP2(w, h, s.Session)
	}
	if r.Good != nil && r.GoodPerSec != nil {
		w.printf("Goodput: %.2f req/s met every latency objective (%d of %d requests)\n", *r.GoodPerSec, *r.Good, r.Sent)
	}
	if len(r.ByOutcome) > 0 {
		var parts []string
		for _, k := range sortedKeys(r.ByOutcome) {
			parts = append(parts, fmt.Sprintf("%s %d", k, r.ByOutcome[k]))
		}
		w.printf("Errors by kind: %s\n", strings.Join(parts, ", "))
	}
	if len(r.ByStatus) > 0 {
		var parts []string
		for _, k := range sortedKeys(r.ByStatus) {
			parts = append(parts, fmt.Sprintf("%d: %d", k, r.ByStatus[k]))
		}
		w.printf("Errors by HTTP status: %s\n", strings.Join(parts, ", "))
	}
	if len(r.TopErrors) > 0 {
		w.printf("Top errors:\n")
		for _, e := range r.TopErrors {
			w.printf("  %6d  %-13s %s\n", e.Count, e.Outcome, e.Message)
		}
	}
	if len(r.Flags) > 0 {
		var parts []string
		for _, k := range sortedKeys(r.Flags) {
			parts = append(parts, fmt.Sprintf("%s %d", k, r.Flags[k]))
		}
		w.printf("Flags: %s\n", strings.Join(parts, ", "))
	}
	if r.Clamped > 0 || r.DroppedStages > 0 {
		w.printf("Note: %d values clamped at ±10 min (the histograms' range), %d stage values dropped (too many stage names)\n",
			r.Clamped, r.DroppedStages)
	}
}

// statsRow writes one row; name is padded to width so that it reads left
// aligned while the numbers align right.
func statsRow(tw io.Writer, width int, name string, st Stats) {
	fmt.Fprintf(tw, "  %-*s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", width, name, st.Count, st.Mean, st.P50, st.P90, st.P99, st.Max)
}

func writeLatency(w *errWriter, s Summary) {
	w.printf("\nLatency (ms)\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	const width = 20
	fmt.Fprintf(tw, "  %-*s\tcount\tmean\tp50\tp90\tp99\tmax\t\n", width, "metric")
	statsRow(tw, width, "ttft", s.TTFT)
	if s.Reasoning != nil {
		statsRow(tw, width, "ttft_answer", s.TTFTAnswer)
		if s.Thinking != nil {
			statsRow(tw, width, "thinking", *s.Thinking)
		}
	}
	statsRow(tw, width, "ttst", s.TTST)
	statsRow(tw, width, "itl", s.ITL)
	statsRow(tw, width, "tpot", s.TPOT)
	statsRow(tw, width, "e2e", s.E2E)
	statsRow(tw, width, "sched_lag", s.SchedLag)
	statsRow(tw, width, "tok/s per request *", s.TokensPerSec)
	_ = tw.Flush()
	w.printf("  * in output tokens per second, not ms\n")
	writeReasoning(w, s)
	if len(s.Stages) == 0 {
		return
	}
	w.printf("\nClient stages (ms)\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  %-*s\tcount\tmean\tp50\tp90\tp99\tmax\t\n", width, "stage")
	for _, name := range ordered(s.Stages, event.ClientStages()) {
		statsRow(tw, width, string(name), s.Stages[name])
	}
	_ = tw.Flush()
}

func writeBreakdown(w *errWriter, b Breakdown) {
	if b.Requests == 0 {
		w.printf("\nTTFT breakdown: none (no server data joined to requests)\n")
		return
	}
	w.printf("\nTTFT breakdown (ms, %d requests)\n", b.Requests)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  stage\tcount\tmean\tp50\tp90\tp99\tshare\tprovenance\n")
	for _, name := range ordered(b.Stages, event.BreakdownStages()) {
		st := b.Stages[name]
		fmt.Fprintf(tw, "  %s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f%%\t%s\n",
			name, st.Count, st.Mean, st.P50, st.P90, st.P99, 100*st.Share, st.ProvenanceText())
	}
	_ = tw.Flush()
	w.printf("  unattributed: %.1f%% of TTFT", 100*b.UnattributedShare)
	if u := b.Stages[event.StageUnattributed]; u.Negative > 0 {
		w.printf("; negative on %d of %d requests (the sources exceed the client's window), shown as they are", u.Negative, u.Count)
	}
	w.printf("\n")
}

// ProvenanceText is the stage's main provenance (of more than half of its
// values, or mixed), with the counts when its values differ, e.g.
// "measured (measured 269, estimated 3)".
func (st BreakdownStage) ProvenanceText() string {
	main := st.Mix.Main()
	if main == "" {
		provs := make([]string, len(st.Provenance))
		for i, p := range st.Provenance {
			provs[i] = string(p)
		}
		return strings.Join(provs, ",")
	}
	var parts []string
	for _, c := range []struct {
		name  event.Provenance
		count int64
	}{{event.Measured, st.Mix.Measured}, {event.ServerReported, st.Mix.Server}, {event.Estimated, st.Mix.Estimated}, {"other", st.Mix.Other}} {
		if c.count > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c.name, c.count))
		}
	}
	if len(parts) <= 1 {
		return string(main)
	}
	return fmt.Sprintf("%s (%s)", main, strings.Join(parts, ", "))
}

// MainProvenances is the stage's main provenance alone, or every one seen
// when none covers most of its values (or they were not counted): what a
// chart marks it by.
func (st BreakdownStage) MainProvenances() []event.Provenance {
	switch main := st.Mix.Main(); main {
	case "", Mixed:
		return st.Provenance
	default:
		return []event.Provenance{main}
	}
}

func writeServer(w *errWriter, s ServerStats) {
	if s.Samples == 0 {
		w.printf("\nServer: no metrics collected\n")
		return
	}
	w.printf("\nServer (%s, %s): %d samples", orDash(s.Dialect), orDash(s.Source), s.Samples)
	if s.Stale > 0 {
		w.printf(", %d stale", s.Stale)
	}
	w.printf("\n")
	if s.QueueDepth.Seen {
		w.printf("  queue depth: peak %.0f, mean %.2f, trend %+.2f/s\n", s.QueueDepth.Peak, s.QueueDepth.Mean, s.QueueSlope)
	}
	if s.Running.Seen {
		w.printf("  running: peak %.0f, mean %.2f\n", s.Running.Peak, s.Running.Mean)
	}
	if s.KVCache.Seen {
		w.printf("  KV cache: peak %.1f%%, mean %.1f%%\n", 100*s.KVCache.Peak, 100*s.KVCache.Mean)
	}
	if len(s.StageMeans) > 0 {
		var parts []string
		for _, k := range sortedKeys(s.StageMeans) {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, s.StageMeans[k]))
		}
		w.printf("  stage means (ms): %s\n", strings.Join(parts, ", "))
	}
	if s.LastStale || s.LastError != "" {
		w.printf("  last sample: stale=%t error=%q\n", s.LastStale, s.LastError)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func writeGPU(w *errWriter, g *event.GPUSample) {
	w.printf("\n")
	switch {
	case g == nil:
		w.printf("GPU: no samples\n")
		return
	case !g.Available:
		reason := orDash(g.Reason)
		// A sample says which collector took it; the exporter's reasons
		// already start with "GPU metrics unavailable".
		if g.Collector != event.GPUCollectorExporter && !strings.HasPrefix(reason, "NVML unavailable") {
			reason = "NVML unavailable: " + reason
		}
		w.printf("GPU: %s\n", reason)
		return
	}
	sim := ""
	if g.Simulated {
		sim = " (simulated)"
	}
	if len(g.Devices) == 0 {
		w.printf("GPU: no devices%s\n", sim)
	}
	for _, d := range g.Devices {
		w.printf("GPU %d %s%s: util %d%%, mem %.1f/%.1f GiB, power %.0f W, %d C, SM %d MHz",
			d.Index, d.Name, sim, d.UtilGPU, gib(d.MemUsed), gib(d.MemTotal), float64(d.PowerMilliW)/1000, d.TempC, d.SMClockMHz)
		if len(d.ThrottleReason) > 0 {
			w.printf(", throttle %s", strings.Join(d.ThrottleReason, ","))
		}
		w.printf("\n")
	}
}

func gib(b uint64) float64 { return float64(b) / (1 << 30) }

// maxReportMarkers bounds the markers listed in the table.
const maxReportMarkers = 10

func writeMarkers(w *errWriter, m Markers, insights []event.Marker) {
	if len(m.Counts) > 0 {
		w.printf("\nMarkers: %s\n", m.CountsText())
		recent := FoldStalls(m.Recent)
		if len(recent) > maxReportMarkers {
			recent = recent[len(recent)-maxReportMarkers:]
		}
		for _, x := range recent {
			msg := x.Message
			if x.Count > 1 {
				msg = fmt.Sprintf("×%d since %s · %s", x.Count, x.First.Format(time.TimeOnly+".000"), msg)
			}
			w.printf("  %s %-11s %s\n", x.Time.Format(time.TimeOnly+".000"), x.Kind, msg)
		}
	}
	if len(insights) > 0 {
		w.printf("\nInsights\n")
		for _, x := range insights {
			w.printf("  - %s\n", x.Message)
		}
	}
}

// DuplicatesNote says that n request events of a recording were copies of
// requests already counted, and were left out.
func DuplicatesNote(n int64) string {
	events := "events"
	if n == 1 {
		events = "event"
	}
	return fmt.Sprintf("%d duplicate request %s ignored: the recording holds those requests twice (the same request id); each is counted once", n, events)
}
