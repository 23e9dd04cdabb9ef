package aggregate

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// reportRun is a small, fully deterministic run touching every section.
func reportRun() Summary {
	a := New(Config{})
	t0 := base()
	for i := 0; i < 10; i++ {
		r := okReq(t0.Add(time.Duration(i)*100*time.Millisecond), time.Duration(100+10*i)*time.Millisecond, 20*time.Millisecond, 5)
		r.SchedLag = time.Duration(i) * 100 * time.Microsecond
		r.Stages = []event.StageTiming{
			{Stage: event.StageConnect, Duration: 2 * time.Millisecond, Provenance: event.Measured},
			{Stage: event.StageWaitHeaders, Duration: 40 * time.Millisecond, Provenance: event.Measured},
		}
		r.Breakdown = []event.StageTiming{
			{Stage: event.StageNetworkOut, Duration: time.Millisecond, Provenance: event.Estimated, Source: "connect_rtt"},
			{Stage: event.StageQueue, Duration: 70 * time.Millisecond, Provenance: event.ServerReported},
			{Stage: event.StagePrefill, Duration: r.TTFT - 81*time.Millisecond, Provenance: event.ServerReported},
			{Stage: event.StageUnattributed, Duration: 10 * time.Millisecond, Provenance: event.Estimated},
		}
		if i == 3 {
			r.Flags = []event.Flag{event.FlagNagleSuspect}
		}
		addAll(a, r)
	}
	addAll(a, errReq(t0.Add(time.Second), event.OutcomeHTTPStatus, 503), errReq(t0.Add(time.Second), event.OutcomeTimeout, 0))
	for i, q := range []float64{1, 3, 5} {
		a.Add(event.NewServer(&event.ServerSample{
			Time: t0.Add(time.Duration(i) * time.Second), Source: "http://127.0.0.1:8000/metrics", Dialect: "vllm",
			Waiting: ptr(q), Running: ptr(4), KVCache: ptr(0.5),
			Stages: map[string]event.HistStat{"queue": {Count: 5, Mean: 70 * time.Millisecond}},
		}))
	}
	a.Add(event.NewGPU(&event.GPUSample{Time: t0, Available: true, Simulated: true, Devices: []event.GPUDevice{{
		Index: 0, Name: "Simulated H100", UtilGPU: 87, MemUsed: 40 << 30, MemTotal: 80 << 30, PowerMilliW: 550000, TempC: 61, SMClockMHz: 1980,
	}}}))
	a.Add(event.NewMarker(&event.Marker{Time: t0.Add(500 * time.Millisecond), Kind: event.MarkerStall, Source: "stall-detector",
		Message: "4 streams paused together for 120 ms", Values: map[string]float64{"streams": 4}}))
	return a.Summary()
}

func TestWriteJSONShapeAndUnits(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if err := WriteJSON(&buf, reportRun()); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(bytes.TrimSpace(buf.Bytes()), []byte("\n}")); n < 1 || !json.Valid(buf.Bytes()) {
		t.Fatalf("not one JSON object:\n%s", buf.String())
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(buf.Bytes(), &top); err != nil {
		t.Fatal(err)
	}
	want := []string{"breakdown", "by_length", "e2e", "end", "gpu", "insights", "itl", "markers", "probe_verdict", "requests", "sched_lag", "server", "stages", "start", "tok_per_s_per_request", "tpot", "ttft", "ttft_answer", "ttft_basis", "ttst"}
	got := slices.Sorted(func(yield func(string) bool) {
		for k := range top {
			if !yield(k) {
				return
			}
		}
	})
	if !slices.Equal(got, want) {
		t.Fatalf("top-level keys = %v, want %v", got, want)
	}

	var rep struct {
		Requests struct {
			Sent, OK, Errors int64
			ByOutcome        map[string]int64 `json:"by_outcome"`
			ByStatus         map[string]int64 `json:"by_status"`
			DurationS        float64          `json:"duration_s"`
			ReqPerS          float64          `json:"req_per_s"`
		}
		TTFT      map[string]float64
		ITL       map[string]float64
		SchedLag  map[string]float64 `json:"sched_lag"`
		Stages    map[string]map[string]float64
		Breakdown struct {
			Stages map[string]struct {
				Mean       float64
				Provenance []string
			}
			UnattributedShare float64 `json:"unattributed_share"`
		}
		Server struct {
			QueueDepth   map[string]float64 `json:"queue_depth"`
			StageMeansMS map[string]float64 `json:"stage_means_ms"`
			Dialect      string
		}
		GPU struct{ Simulated bool }
	}
	if err := json.Unmarshal(buf.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Requests.Sent != 12 || rep.Requests.OK != 10 || rep.Requests.ByStatus["503"] != 1 || rep.Requests.ByOutcome["timeout"] != 1 {
		t.Errorf("requests = %+v", rep.Requests)
	}
	// Milliseconds: TTFTs are 100..190 ms, ITL is 20 ms.
	if rep.TTFT["mean"] != 145 || rep.TTFT["max"] != 190 || rep.TTFT["count"] != 10 || rep.ITL["p50"] != 20 {
		t.Errorf("ttft %v itl %v, want milliseconds", rep.TTFT, rep.ITL)
	}
	for _, k := range []string{"mean", "p50", "p90", "p99", "max", "count"} {
		if _, ok := rep.TTFT[k]; !ok {
			t.Errorf("ttft lacks %q", k)
		}
	}
	if rep.Stages["connect"]["mean"] != 2 || rep.SchedLag["max"] != 0.9 {
		t.Errorf("stages = %v, sched lag %v", rep.Stages, rep.SchedLag)
	}
	if q := rep.Breakdown.Stages["queue"]; q.Mean != 70 || !slices.Equal(q.Provenance, []string{"server"}) {
		t.Errorf("breakdown queue = %+v", q)
	}
	if rep.Breakdown.UnattributedShare <= 0 {
		t.Errorf("unattributed share = %v", rep.Breakdown.UnattributedShare)
	}
	if rep.Server.QueueDepth["peak"] != 5 || rep.Server.StageMeansMS["queue"] != 70 || rep.Server.Dialect != "vllm" {
		t.Errorf("server = %+v", rep.Server)
	}
	if !rep.GPU.Simulated {
		t.Errorf("gpu not marked simulated")
	}
}

func TestWriteJSONEmptyRun(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if err := WriteJSON(&buf, New(Config{}).Summary()); err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := json.Unmarshal(buf.Bytes(), &top); err != nil {
		t.Fatal(err)
	}
	if top["gpu"] != nil {
		t.Errorf("gpu = %v, want null before any sample", top["gpu"])
	}
	if _, ok := top["insights"].([]any); !ok {
		t.Errorf("insights = %v, want an empty list", top["insights"])
	}
}

func TestWriteTableGolden(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if err := WriteTable(&buf, reportRun()); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "table.golden")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got := buf.String(); got != string(want) {
		t.Errorf("table differs from %s (rerun with -update if intended):\n--- got\n%s\n--- want\n%s", golden, got, want)
	}
	for _, s := range []string{
		"Requests: 12 sent, 10 ok, 2 errors", "Errors by HTTP status: 503: 1", "ttft", "wait_headers",
		"queue", "server", "unattributed:", "Server (vllm", "GPU 0 Simulated H100 (simulated)", "stall",
	} {
		if !strings.Contains(buf.String(), s) {
			t.Errorf("table lacks %q", s)
		}
	}
}

func TestWriteTableGPUUnavailable(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	s := Summary{GPU: &event.GPUSample{Available: false, Reason: "built without cgo"}}
	if err := WriteTable(&buf, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "GPU: NVML unavailable: built without cgo\n") {
		t.Errorf("table:\n%s", buf.String())
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, os.ErrClosed }

func TestWritersReturnErrors(t *testing.T) {
	t.Parallel()
	s := reportRun()
	if err := WriteTable(failWriter{}, s); err == nil {
		t.Error("WriteTable: no error from a failing writer")
	}
	if err := WriteJSON(failWriter{}, s); err == nil {
		t.Error("WriteJSON: no error from a failing writer")
	}
}

func TestStatusLine(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	t0 := base()
	for i := 0; i < 10; i++ {
		addAll(a, okReq(t0.Add(time.Duration(i)*time.Second), 100*time.Millisecond, 10*time.Millisecond, 11))
	}
	addAll(a, errReq(t0.Add(5*time.Second), event.OutcomeTimeout, 0))
	a.Add(event.NewProbe(&event.ProbeSample{Time: t0.Add(9 * time.Second), InFlight: 3, CPUPercent: 12, LagSamples: 5, SchedLagP99: 1500 * time.Microsecond}))
	got := StatusLine(a.Snapshot(t0.Add(9500 * time.Millisecond)))
	for _, s := range []string{"9s", "in flight 3", "req/s", "tok/s", "TTFT p50 100.", "(10s)", "errors 1 (9.1%)", "latscope cpu 12%", "lag p99 1.5 ms"} {
		if !strings.Contains(got, s) {
			t.Errorf("status line %q lacks %q", got, s)
		}
	}
	if strings.Contains(got, "\n") {
		t.Errorf("status line has a newline: %q", got)
	}
}

func TestElapsedCountsFromTheSessionStart(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	t0 := base()
	a.Add(event.NewSession(&event.Session{Time: t0, Target: "http://x"}))
	// No request has finished yet: the clock still runs from the session's start.
	s := a.Snapshot(t0.Add(3 * time.Second))
	if s.Elapsed != 3*time.Second || s.Session == nil || s.Session.Target != "http://x" {
		t.Fatalf("elapsed %v, session %+v: want 3s and the header", s.Elapsed, s.Session)
	}
}

func TestLossesAreCounted(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	t0 := base()
	a.Add(event.NewLoss(&event.Loss{Time: t0, Consumer: "agent us-east", Events: 40}))
	a.Add(event.NewLoss(&event.Loss{Time: t0, Consumer: "agent us-east", Events: 2}))
	if got := a.Snapshot(t0).Lost["agent us-east"]; got != 42 {
		t.Fatalf("lost = %d, want 42", got)
	}
}

func TestTableSaysWhatWasLost(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	a.Add(event.NewLoss(&event.Loss{Time: base(), Consumer: "agent-stream", Events: 91}))
	var buf bytes.Buffer
	if err := WriteTable(&buf, a.Summary()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "Lost events (not in these figures): agent-stream 91") {
		t.Errorf("table does not say what was lost:\n%s", buf.String())
	}
}

// The recorder's losses are in a live run's figures, only not in the file:
// they are counted apart from Lost, in the table and in the JSON.
func TestUnrecordedEventsAreCountedApart(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	const why = "write recording: no space left on device"
	a.Add(event.NewLoss(&event.Loss{Time: base(), Consumer: event.ConsumerRecorder, Events: 1000, Reason: why}))
	a.Add(event.NewLoss(&event.Loss{Time: base(), Consumer: event.ConsumerRecorder, Events: 164, Reason: "later"}))
	s := a.Summary()
	if s.Unrecorded == nil || s.Unrecorded.Events != 1164 || s.Unrecorded.Reason != why {
		t.Fatalf("unrecorded = %+v, want 1164 events and the first reason", s.Unrecorded)
	}
	if len(s.Lost) != 0 {
		t.Errorf("lost = %v: unrecorded events are not lost to the figures", s.Lost)
	}
	var table, js bytes.Buffer
	if err := WriteTable(&table, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "Recording incomplete: 1164 events are missing from the recording") {
		t.Errorf("table does not say the recording is incomplete:\n%s", table.String())
	}
	if err := WriteJSON(&js, s); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Unrecorded *Unrecorded `json:"unrecorded"`
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil || got.Unrecorded == nil || got.Unrecorded.Events != 1164 {
		t.Errorf("JSON unrecorded = %+v (%v), want 1164 events", got.Unrecorded, err)
	}
	if clean := New(Config{}).Summary(); clean.Unrecorded != nil {
		t.Errorf("a run without a recorder loss has unrecorded %+v", clean.Unrecorded)
	}
}
