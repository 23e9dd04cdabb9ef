package sweep

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// synthStep is a finished open-loop step for the selection tests: its load,
// throughput, p99 TTFT, largest stage and verdict.
func synthStep(index int, load, ok, ttftP99 float64, largest event.Stage, pass, saturated bool) Step {
	s := Step{
		StepSpec:   StepSpec{Index: index, Load: Load{Mode: OpenLoop, Value: load}},
		Throughput: ok, TokPerSec: 16 * ok, OK: int64(10 * ok),
		TTFT: aggregate.Stats{Count: 100, P50: ttftP99 / 2, P99: ttftP99}, ITL: aggregate.Stats{Count: 1000, P99: 10},
		Steady: !saturated, Saturated: saturated, Pass: pass,
		Reason: "synthetic",
	}
	if largest != "" {
		s.HasBreakdown, s.LargestStage = true, largest
		if largest == event.StageQueue {
			s.QueueShare = 0.7
		}
	}
	return s
}

func sloOf(t *testing.T, spec string) []aggregate.Objective {
	t.Helper()
	o, err := aggregate.ParseSLO(spec)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// sweepSteps is a sweep as it ran: coarse steps to saturation, then three
// refinements, one of which (109) failed the SLO without saturating.
func sweepSteps() []Step {
	return []Step{
		synthStep(1, 25, 25, 14, event.StagePrefill, true, false),
		synthStep(2, 50, 50, 15, event.StagePrefill, true, false),
		synthStep(3, 100, 100, 40, event.StagePrefill, true, false),
		synthStep(4, 200, 112, 1300, event.StageQueue, false, true),
		synthStep(5, 141.4, 110, 650, event.StageQueue, false, true),
		synthStep(6, 118.9, 108, 260, event.StageQueue, false, false),
		synthStep(7, 109, 107, 90, event.StagePrefill, true, false),
	}
}

func TestResultFindings(t *testing.T) {
	r := NewResult(sweepSteps(), sloOf(t, "ttft.p99<100ms"))
	if r.MaxLoad == nil || r.MaxLoad.Step != 7 || !strings.Contains(r.MaxLoad.Why, "118.9 req/s at step 6 did not") {
		t.Errorf("max load %+v, want step 7 (109 req/s), bounded by step 6", r.MaxLoad)
	}
	if r.Knee == nil || r.Knee.Step != 6 || !strings.Contains(r.Knee.Why, "70%") {
		t.Errorf("knee %+v, want step 6: the lowest load where queue is the largest stage", r.Knee)
	}
	if r.Knee != nil && !strings.Contains(r.Knee.Why, "above the max load (109 req/s): this step's verdict was fail") {
		t.Errorf("knee why %q: want why it lies above the max load", r.Knee.Why)
	}
	if r.Saturation == nil || r.Saturation.Step != 4 || r.Saturation.Throughput != 112 || !strings.Contains(r.Saturation.Why, "saturated") {
		t.Errorf("saturation %+v, want step 4 with 112 ok/s", r.Saturation)
	}
	if len(r.Notes) != 0 {
		t.Errorf("notes %q, want none", r.Notes)
	}
	if r.Mode != OpenLoop || r.SLO != "ttft.p99<100ms" {
		t.Errorf("mode %q, slo %q", r.Mode, r.SLO)
	}
}

func TestResultWithoutSLOTakesTheLastSustainableLoad(t *testing.T) {
	steps := sweepSteps()
	for i := range steps {
		steps[i].Pass = !steps[i].Saturated
	}
	r := NewResult(steps, nil)
	if r.MaxLoad == nil || r.MaxLoad.Step != 6 || !strings.Contains(r.MaxLoad.Why, "without saturating") {
		t.Errorf("max load %+v, want step 6 (118.9 req/s), the highest below the first saturated", r.MaxLoad)
	}
}

func TestResultNotes(t *testing.T) {
	t.Run("no breakdown, nothing saturated, first step fails", func(t *testing.T) {
		steps := []Step{
			synthStep(1, 10, 10, 500, "", false, false),
			synthStep(2, 20, 20, 600, "", false, false),
		}
		r := NewResult(steps, sloOf(t, "ttft.p99<100ms"))
		if r.MaxLoad != nil || r.Knee != nil || r.Saturation == nil || r.Saturation.Step != 2 {
			t.Errorf("findings %+v %+v %+v: want no max load, no knee, saturation at the highest throughput", r.MaxLoad, r.Knee, r.Saturation)
		}
		text := strings.Join(r.Notes, "\n")
		for _, want := range []string{"start the sweep lower", "no step had a TTFT breakdown", "did not saturate", "capacity may be higher"} {
			if !strings.Contains(text, want) && !strings.Contains(r.Saturation.Why, want) {
				t.Errorf("notes %q, saturation %q: want %q", r.Notes, r.Saturation.Why, want)
			}
		}
	})
	t.Run("queue never dominates", func(t *testing.T) {
		r := NewResult([]Step{synthStep(1, 10, 10, 50, event.StagePrefill, true, false)}, nil)
		if r.Knee != nil || !strings.Contains(strings.Join(r.Notes, "\n"), "never became the largest stage") {
			t.Errorf("knee %+v, notes %q", r.Knee, r.Notes)
		}
	})
	t.Run("a server wait is no knee", func(t *testing.T) {
		r := NewResult([]Step{synthStep(1, 10, 10, 50, event.StageServerWait, true, false)}, nil)
		if text := strings.Join(r.Notes, "\n"); r.Knee != nil || !strings.Contains(text, "the server wait (front end and queue, not told apart) did") {
			t.Errorf("knee %+v, notes %q: want no knee, and a note on the server wait", r.Knee, r.Notes)
		}
	})
	t.Run("interrupted steps count for nothing", func(t *testing.T) {
		s := synthStep(1, 10, 500, 50, event.StageQueue, false, false)
		s.Interrupted = true
		r := NewResult([]Step{s}, nil)
		if r.Knee != nil || r.Saturation != nil || len(r.Curve()) != 0 {
			t.Errorf("knee %+v, saturation %+v, curve %v: want nothing from an interrupted step", r.Knee, r.Saturation, r.Curve())
		}
	})
	if r := NewResult(nil, nil); r.MaxLoad != nil || r.Knee != nil || r.Saturation != nil || len(r.Notes) != 0 {
		t.Errorf("empty sweep: %+v", r)
	}
}

// TestResultWithoutASuccessfulRequest: steps that measured nothing yield
// no findings, and the table and JSON show what was not measured as "-"
// and null, not 0.
func TestResultWithoutASuccessfulRequest(t *testing.T) {
	failed := Step{
		StepSpec: StepSpec{Index: 1, Load: Load{Mode: OpenLoop, Value: 2}}, Measured: time.Second,
		Sent: 20, Errors: 20, ErrorRate: 1, ErrorsOver: true, Steady: true,
		Failed: "no request succeeded: HTTP 429", Reason: "errors 100.0% passed the 5.0% limit",
	}
	r := NewResult([]Step{failed}, nil)
	if r.MaxLoad != nil || r.Knee != nil || r.Saturation != nil {
		t.Errorf("findings %+v %+v %+v: want none from a step without a success", r.MaxLoad, r.Knee, r.Saturation)
	}
	if want := "step 1 (2 req/s): no request succeeded: HTTP 429"; r.Failure != want {
		t.Errorf("failure %q, want %q", r.Failure, want)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	table := b.String()
	for _, want := range []string{"Failed: step 1 (2 req/s): no request succeeded: HTTP 429", "Saturation: none (no step had a successful request)", "Max load: none (no step had a successful request)"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "0.00") {
		t.Errorf("table shows a latency it did not measure as 0.00:\n%s", table)
	}
	b.Reset()
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Steps []map[string]json.RawMessage `json:"steps"`
		Curve []map[string]json.RawMessage `json:"curve"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil || len(got.Steps) != 1 || len(got.Curve) != 1 {
		t.Fatalf("JSON %v: %s", err, b.String())
	}
	for _, k := range []string{"ttft", "itl", "tpot", "e2e", "queue_share", "queue_depth"} {
		if v := string(got.Steps[0][k]); v != "null" {
			t.Errorf("step %s = %s, want null", k, v)
		}
	}
	// Measured, if nothing succeeded: no successes a second, all errors.
	if v, e := string(got.Steps[0]["ok_per_s"]), string(got.Steps[0]["error_rate"]); v != "0" || e != "1" {
		t.Errorf("step ok_per_s %s, error_rate %s: want 0 and 1, measured", v, e)
	}
	for _, k := range []string{"ttft_p50", "ttft_p99", "itl_p99", "tpot_p50"} {
		if v := string(got.Curve[0][k]); v != "null" {
			t.Errorf("curve %s = %s, want null", k, v)
		}
	}
	if v := string(got.Steps[0]["failed"]); !strings.Contains(v, "HTTP 429") {
		t.Errorf("step failed = %s, want the cause", v)
	}
}

func TestCurveIsByLoad(t *testing.T) {
	r := NewResult(sweepSteps(), nil)
	c := r.Curve()
	if len(c) != 7 {
		t.Fatalf("%d points, want 7", len(c))
	}
	for i := 1; i < len(c); i++ {
		if c[i].Load.Value <= c[i-1].Load.Value {
			t.Errorf("curve not by load: %v before %v", c[i-1].Load, c[i].Load)
		}
	}
	val := func(v *float64) float64 {
		if v == nil {
			return -1
		}
		return *v
	}
	if p := c[3]; p.Step != 7 || p.Throughput != 107 || val(p.TTFTP99) != 90 || val(p.TTFTP50) != 45 || val(p.ITLP99) != 10 {
		t.Errorf("fourth point %+v, want step 7", p)
	}
	if r.Step(5) == nil || r.Step(5).Load.Value != 141.4 || r.Step(99) != nil {
		t.Error("Step looks steps up by index")
	}
}

func TestWriteTable(t *testing.T) {
	r := NewResult(sweepSteps(), sloOf(t, "ttft.p99<100ms"))
	r.Stopped = "step 4 (200 req/s) saturated the server"
	var b bytes.Buffer
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Sweep: open loop (rate), 7 steps, SLO ttft.p99<100ms",
		"Stopped: step 4 (200 req/s) saturated the server",
		"TTFT p50", "queue share",
		"Max load: 109 req/s (step 7): 107.0 ok/s, 1712 tok/s",
		"Knee: 118.9 req/s (step 6)",
		"Saturation: 200 req/s (step 4): 112.0 ok/s",
		"  5  141.4 req/s, measured 0.0 s: synthetic",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// Rows go by load: 109 (step 7) before 118.9 (step 6).
	if strings.Index(out, "109 req/s  ") > strings.Index(out, "118.9 req/s  ") {
		t.Errorf("rows not by load:\n%s", out)
	}
}

func TestWriteJSON(t *testing.T) {
	r := NewResult(sweepSteps(), sloOf(t, "ttft.p99<100ms"))
	var b bytes.Buffer
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Mode    string           `json:"mode"`
		MaxLoad *Finding         `json:"max_load"`
		Knee    *Finding         `json:"knee"`
		Steps   []map[string]any `json:"steps"`
		Curve   []CurvePoint     `json:"curve"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if got.Mode != "rate" || got.MaxLoad == nil || got.MaxLoad.Step != 7 || got.Knee == nil || got.Knee.Step != 6 || len(got.Steps) != 7 || len(got.Curve) != 7 {
		t.Errorf("decoded %+v", got)
	}
	for _, key := range []string{"index", "load", "ok_per_s", "ttft", "queue_share", "signals", "steady", "reason", "pass"} {
		if _, ok := got.Steps[0][key]; !ok {
			t.Errorf("step JSON lacks %q: %v", key, got.Steps[0])
		}
	}
	b.Reset()
	if err := WriteJSON(&b, Result{}); err != nil || !strings.Contains(b.String(), `"steps": []`) || !strings.Contains(b.String(), `"curve": []`) {
		t.Errorf("empty result: %v\n%s", err, b.String())
	}
}

// TestKnee judges the knee on synthetic steps: never on a step that
// measured nothing, never from a queue share where the server's queue
// gauge showed nothing waiting, and above the max load only with the
// reason said.
func TestKnee(t *testing.T) {
	// queued sets a step's queue share and the gauge's mean depth.
	queued := func(s Step, share, depth float64) Step {
		s.HasBreakdown, s.LargestStage, s.QueueShare = true, event.StageQueue, share
		s.HasQueueDepth, s.QueueDepth = true, depth
		return s
	}
	t.Run("at or below the max load, backed by the gauge", func(t *testing.T) {
		steps := []Step{
			synthStep(1, 2, 2, 40, event.StagePrefill, true, false),
			queued(synthStep(2, 4, 4, 60, "", true, false), 0.55, 2.5),
			queued(synthStep(3, 8, 6, 900, "", false, true), 0.9, 40),
		}
		r := NewResult(steps, nil)
		if r.MaxLoad == nil || r.MaxLoad.Step != 2 {
			t.Fatalf("max load %+v, want step 2", r.MaxLoad)
		}
		if r.Knee == nil || r.Knee.Step != 2 || !strings.Contains(r.Knee.Why, "55% of the mean; mean queue depth 2.5") || strings.Contains(r.Knee.Why, "above the max load") {
			t.Errorf("knee %+v, want step 2 backed by the gauge, at the max load", r.Knee)
		}
	})
	t.Run("a queue share where nothing queued", func(t *testing.T) {
		// At 1 req/s the breakdown called 67% of TTFT a queue, but the
		// server's gauge never showed a request waiting.
		steps := []Step{
			queued(synthStep(1, 1, 1, 40, "", true, false), 0.67, 0),
			synthStep(2, 2, 2, 45, event.StagePrefill, true, false),
		}
		r := NewResult(steps, nil)
		if r.Knee != nil {
			t.Errorf("knee %+v at a step where nothing queued", r.Knee)
		}
		if text := strings.Join(r.Notes, "\n"); !strings.Contains(text, "no knee: queue wait was the largest stage of TTFT at 1 req/s (step 1, 67% of the mean), but the server's queue gauge showed no request waiting there") {
			t.Errorf("notes %q: want why there is no knee", r.Notes)
		}
		// A higher step where the gauge did show requests waiting is
		// the knee.
		steps = append(steps, queued(synthStep(3, 4, 4, 80, "", true, false), 0.6, 1.5))
		if r := NewResult(steps, nil); r.Knee == nil || r.Knee.Step != 3 {
			t.Errorf("knee %+v, want step 3, the first whose queue the gauge backs", r.Knee)
		}
	})
	t.Run("without a gauge the attributed queue stands", func(t *testing.T) {
		s := synthStep(1, 4, 4, 80, event.StageQueue, true, false)
		if r := NewResult([]Step{s}, nil); r.Knee == nil || r.Knee.Step != 1 || strings.Contains(r.Knee.Why, "queue depth") {
			t.Errorf("knee %+v, want step 1 on the breakdown alone", r.Knee)
		}
	})
	t.Run("never on a step that measured nothing, above the max load with the reason", func(t *testing.T) {
		// Max load 8 req/s; the refinement at 8.72 req/s had no
		// successful request; 9.51 req/s missed the SLO with queue wait
		// leading.
		noSuccess := queued(synthStep(5, 8.72, 0, 0, "", false, false), 0.8, 12)
		noSuccess.OK, noSuccess.Failed = 0, "no request succeeded: HTTP 503"
		steps := []Step{
			synthStep(1, 2, 2, 40, event.StagePrefill, true, false),
			synthStep(2, 4, 4, 50, event.StagePrefill, true, false),
			synthStep(3, 8, 8, 90, event.StagePrefill, true, false),
			queued(synthStep(4, 16, 9, 2000, "", false, true), 0.95, 80),
			noSuccess,
			queued(synthStep(6, 9.51, 9, 300, "", false, false), 0.7, 6),
		}
		r := NewResult(steps, sloOf(t, "ttft.p99<100ms"))
		if r.MaxLoad == nil || r.MaxLoad.Step != 3 {
			t.Fatalf("max load %+v, want step 3 (8 req/s)", r.MaxLoad)
		}
		if r.Knee == nil || r.Knee.Step != 6 {
			t.Fatalf("knee %+v, want step 6 (9.51 req/s): step 5 measured nothing", r.Knee)
		}
		if !strings.Contains(r.Knee.Why, "above the max load (8 req/s): this step's verdict was fail") {
			t.Errorf("knee why %q: want why it lies above the max load", r.Knee.Why)
		}
	})
}
