package report

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"html"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/aggregate/sweepjudge"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/sweep"
)

// fifoSweep is a synthetic server for a sweep on a virtual clock: one FIFO
// queue in front of a service of capacity requests per second; a request
// takes 20 ms to its first token once served and 50 ms more to its last.
type fifoSweep struct {
	capacity float64
	mu       sync.Mutex
	now      time.Time
}

func (f *fifoSweep) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fifoSweep) advance(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.After(f.now) {
		f.now = t
	}
}

// step is one open-loop step's source: each request's record at its
// completion and a server sample (queue depth) every 250 ms, in time order,
// until the sweep ends it; the requests then in flight are recorded as
// cancelled by the run's end (RunEnded), as the probe records them.
func (f *fifoSweep) step(spec sweep.StepSpec) (pipeline.Source, error) {
	return pipeline.SourceFunc(func(ctx context.Context, emit func(event.Event)) error {
		type req struct{ sent, served, first, done time.Time }
		const horizon = 21 * time.Second
		t0 := f.clock()
		service := time.Duration(float64(time.Second) / f.capacity)
		gap := time.Duration(float64(time.Second) / spec.Load.Value)
		var reqs []req
		free := t0
		for at := t0; at.Before(t0.Add(horizon)); at = at.Add(gap) {
			served := at
			if free.After(at) {
				served = free
			}
			free = served.Add(service)
			reqs = append(reqs, req{at, served, served.Add(20 * time.Millisecond), served.Add(70 * time.Millisecond)})
		}
		type timed struct {
			at time.Time
			ev event.Event
		}
		var evs []timed
		for i, r := range reqs {
			rec := &event.Request{Seq: uint64(i), Intended: r.sent, Start: r.sent, Outcome: event.OutcomeOK,
				TTFT: r.first.Sub(r.sent), E2E: r.done.Sub(r.sent), OutputTokens: 10,
				Breakdown: []event.StageTiming{
					{Stage: event.StageQueue, Duration: r.served.Sub(r.sent), Provenance: event.ServerReported},
					{Stage: event.StagePrefill, Duration: 20 * time.Millisecond, Provenance: event.ServerReported},
				}}
			evs = append(evs, timed{r.done, event.NewRequest(rec)})
		}
		for at := t0; at.Before(t0.Add(horizon)); at = at.Add(250 * time.Millisecond) {
			waiting := 0.0
			for _, r := range reqs {
				if !r.sent.After(at) && r.served.After(at) {
					waiting++
				}
			}
			evs = append(evs, timed{at, event.NewServer(&event.ServerSample{Time: at, Source: "synthetic", Dialect: "vllm", Waiting: &waiting})})
		}
		slices.SortStableFunc(evs, func(a, b timed) int { return a.at.Compare(b.at) })
		for _, e := range evs {
			if ctx.Err() != nil {
				break
			}
			f.advance(e.at)
			emit(e.ev)
		}
		now := f.clock()
		for i, r := range reqs {
			if !r.sent.After(now) && r.done.After(now) {
				emit(event.NewRequest(&event.Request{Seq: uint64(i), Intended: r.sent, Start: r.sent, Outcome: event.OutcomeCancelled, RunEnded: true}))
			}
		}
		return nil
	}), nil
}

// TestSweepRecordingReport: a sweep recorded by the real recorder, in every
// format: the answer and the table of steps the live sweep printed, and no
// request its steps' ends cut counted as an error.
func TestSweepRecordingReport(t *testing.T) {
	t.Parallel()
	server := &fifoSweep{capacity: 60, now: t0}
	slo, err := aggregate.ParseSLO("ttft.p99<100ms")
	if err != nil {
		t.Fatal(err)
	}
	header := &event.Session{Time: t0, Latscope: "test", Name: "sweep", Target: "http://10.0.0.1:8000", Server: "vllm", Dialect: "openai-chat",
		Load: event.Load{Mode: "sweep", Arrival: "constant", SLO: "ttft.p99<100ms"}}
	fan := pipeline.NewFanout()
	sub := fan.Subscribe("recording", 1<<16, pipeline.Lossless)
	collected := make(chan []event.Event, 1)
	go func() {
		var evs []event.Event
		for ev := range sub.Events() {
			if ev.Session == nil { // the recorder writes the header apart
				evs = append(evs, ev)
			}
		}
		collected <- evs
	}()
	live, err := sweep.Run(context.Background(), sweep.Config{
		Plan: sweep.Plan{Mode: sweep.OpenLoop, Loads: []float64{20, 40, 80}}, Step: server.step,
		Header: header, Fanout: fan, Now: server.clock, Buffer: 16,
		Rules: sweepjudge.Rules{SLO: slo, Warmup: time.Second, Window: 4 * time.Second, StepMax: 20 * time.Second, Interval: 250 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	if live.MaxLoad == nil || live.MaxLoad.Load.Value != 40 || live.Knee == nil {
		t.Fatalf("the live sweep: max load %+v, knee %+v; want 40 req/s and a knee", live.MaxLoad, live.Knee)
	}
	var printed bytes.Buffer
	if err := sweep.WriteTable(&printed, live); err != nil {
		t.Fatal(err)
	}
	path := writeRecording(t, t.TempDir(), "sweep.zst", header, <-collected, 100)
	rec, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if r := rec.Summary.Requests; r.Errors != 0 {
		t.Errorf("%d errors (%d cancelled at the end): the requests the steps' ends cut are cancelled, not failed", r.Errors, r.CancelledAtEnd)
	}
	if rec.Sweep == nil {
		t.Fatalf("no sweep in the report of a sweep recording; warnings %v", rec.Warnings)
	}

	// What sweep printed, line by line, is in the text formats: the
	// answer, why it stopped, and every cell of the table.
	var lines []string
	lines = append(lines, live.Heading()...)
	lines = append(lines, live.Findings()...)
	lines = append(lines, live.StepLines()...)
	for _, l := range lines {
		if !strings.Contains(printed.String(), l) {
			t.Fatalf("sweep's table lacks its own line %q", l)
		}
	}
	for _, f := range []Format{Markdown, HTML} {
		var buf bytes.Buffer
		if err := Write(&buf, f, rec); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		if f == HTML {
			out = html.UnescapeString(out)
		} else {
			out = strings.NewReplacer(`\|`, "|", `\*`, "*", `\_`, "_", `\<`, "<", `\>`, ">").Replace(out)
		}
		for _, l := range lines {
			if !strings.Contains(out, l) {
				t.Errorf("%s report lacks %q", f, l)
			}
		}
		for _, row := range live.TableRows() {
			if f == Markdown && !strings.Contains(out, "| "+strings.Join(row, " | ")+" |") {
				t.Errorf("markdown report lacks the row %q", row)
			}
			if f == HTML && !strings.Contains(strings.ReplaceAll(out, ` class="num"`, ""), "<tr><td>"+strings.Join(row, "</td><td>")+"</td></tr>") {
				t.Errorf("html report lacks the row %q", row)
			}
		}
	}

	// The HTML's curve marks the knee and the max load the live sweep found.
	curve := chartNode(t, checkOffline(t, renderHTML(t, rec)), "sweep-curve")
	for class, step := range map[string]int{"knee": live.Knee.Step, "max-load": live.MaxLoad.Step} {
		if marks := groups(curve, class); len(marks) != 1 || attr(marks[0], "data-step") != strconv.Itoa(step) {
			t.Errorf("the curve's %s marks %d groups, want one at step %d", class, len(marks), step)
		}
	}
	if n := len(groups(curve, "step")); n != len(live.Curve()) {
		t.Errorf("the curve has %d steps, want %d", n, len(live.Curve()))
	}

	checkSweepJSONAndCSV(t, rec, live)
}

// checkSweepJSONAndCSV checks that the JSON and CSV reports of a sweep
// recording give the live sweep's findings, steps and rows.
func checkSweepJSONAndCSV(t *testing.T, rec *Recording, live sweep.Result) {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, JSON, rec); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Report struct {
			Sweep *struct {
				MaxLoad *sweep.Finding `json:"max_load"`
				Knee    *sweep.Finding `json:"knee"`
				Steps   []sweep.Step   `json:"steps"`
				Stopped string         `json:"stopped"`
			} `json:"sweep"`
		} `json:"report"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if s := doc.Report.Sweep; s == nil || s.MaxLoad == nil || *s.MaxLoad != *live.MaxLoad || s.Knee == nil || *s.Knee != *live.Knee ||
		len(s.Steps) != len(live.Steps) || s.Stopped != live.Stopped {
		t.Errorf("json report's sweep %+v, live max load %+v knee %+v stopped %q", s, live.MaxLoad, live.Knee, live.Stopped)
	}

	buf.Reset()
	if err := Write(&buf, CSV, rec); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"sweep,max_load,load,40,req/s,": false, "sweep,max_load,step,2,step,": false, "sweep_step,3,load,80,req/s,": false, "sweep_step,3,pass,0,bool,": false}
	for _, r := range rows {
		if _, ok := want[strings.Join(r, ",")]; ok {
			want[strings.Join(r, ",")] = true
		}
	}
	for r, seen := range want {
		if !seen {
			t.Errorf("csv report lacks the row %s", r)
		}
	}
}

// TestNoSweepWithoutSweep: a run that was no sweep has no sweep section.
func TestNoSweepWithoutSweep(t *testing.T) {
	t.Parallel()
	rec := defaultSynth(1).load(t)
	if rec.Sweep != nil {
		t.Errorf("a sweep in a plain run: %+v", rec.Sweep)
	}
	var buf bytes.Buffer
	if err := Write(&buf, JSON, rec); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(buf.Bytes(), []byte(`"sweep"`)) {
		t.Error("a plain run's json report has a sweep key")
	}
}
