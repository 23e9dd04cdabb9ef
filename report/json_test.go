package report

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// The JSON report is aggregate.WriteJSON's object for the same events, with
// one key added.
func TestJSONIsTheAggregateSummaryPlusReport(t *testing.T) {
	t.Parallel()
	s := defaultSynth(4)
	var got bytes.Buffer
	if err := Write(&got, JSON, s.load(t)); err != nil {
		t.Fatal(err)
	}
	agg := aggregate.New(aggregate.Config{})
	agg.Add(event.NewSession(s.sessionHeader()))
	for _, ev := range byTime(s.events()) {
		agg.Add(ev)
	}
	var want bytes.Buffer
	if err := aggregate.WriteJSON(&want, agg.Summary()); err != nil {
		t.Fatal(err)
	}

	var gotObj, wantObj map[string]any
	if err := json.Unmarshal(got.Bytes(), &gotObj); err != nil {
		t.Fatalf("report is not JSON: %v", err)
	}
	if err := json.Unmarshal(want.Bytes(), &wantObj); err != nil {
		t.Fatal(err)
	}
	extra, ok := gotObj["report"].(map[string]any)
	if !ok {
		t.Fatal(`no "report" object`)
	}
	delete(gotObj, "report")
	if !reflect.DeepEqual(gotObj, wantObj) {
		for k := range wantObj {
			if !reflect.DeepEqual(gotObj[k], wantObj[k]) {
				t.Errorf("key %q differs:\n got %v\nwant %v", k, gotObj[k], wantObj[k])
			}
		}
		t.Fatal("the summary is not aggregate's")
	}
	// The summary's own bytes come first, unchanged.
	if !bytes.HasPrefix(got.Bytes(), bytes.TrimRight(bytes.TrimSuffix(want.Bytes(), []byte("}\n")), "\n")) {
		t.Error("the summary's bytes were rewritten")
	}

	series := extra["series"].(map[string]any)
	if series["step_s"] != 1.0 || series["window"] != "10s" {
		t.Errorf("series step %v window %v", series["step_s"], series["window"])
	}
	points := series["points"].([]any)
	if len(points) < 60 {
		t.Fatalf("%d points", len(points))
	}
	mid := points[30].(map[string]any)
	for _, k := range []string{"at_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "waiting", "running", "in_flight", "ok_per_s", "tok_per_s"} {
		if _, ok := mid[k].(float64); !ok {
			t.Errorf("point lacks %s: %v", k, mid)
		}
	}
	p99 := extra["bands"].(map[string]any)["p99"].(map[string]any)
	if p99["ttft_ms"].(float64) <= 0 || p99["stages_ms"].(map[string]any)["queue"].(float64) <= 0 {
		t.Errorf("slowest band: %v", p99)
	}
	if w := extra["warnings"].([]any); len(w) != 0 {
		t.Errorf("warnings: %v", w)
	}
}

func TestJSONUnknownValuesAreNull(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(Point{At: 1500 * time.Millisecond, TTFTP50: nan(), TTFTP99: 2.0004, ITLP50: nan(), ITLP99: nan(),
		Waiting: nan(), Running: nan(), InFlight: 3, OKPerSec: nan(), TokPerSec: nan()})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"at_s":1.5,"ttft_p50_ms":null,"ttft_p99_ms":2,"itl_p50_ms":null,"itl_p99_ms":null,"waiting":null,"running":null,"in_flight":3,"ok_per_s":null,"tok_per_s":null}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}

func TestJSONComparison(t *testing.T) {
	t.Parallel()
	c := compare(t, defaultSynth(5).load(t), defaultSynth(6).load(t))
	var buf bytes.Buffer
	if err := WriteComparison(&buf, JSON, c); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Base       map[string]json.RawMessage
		Other      map[string]json.RawMessage
		Comparison struct {
			Rule    string
			Alpha   float64
			WindowS float64 `json:"window_s"`
			Windows [2]int
			Changes []map[string]any
		}
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Base["ttft"] == nil || got.Other["report"] == nil {
		t.Error("the runs' objects are missing keys")
	}
	cmp := got.Comparison
	if cmp.Rule != Rule || cmp.Alpha != 0.05 || cmp.WindowS != 5 || cmp.Windows != [2]int{11, 11} || len(cmp.Changes) != len(c.Changes) {
		t.Errorf("comparison: rule %q alpha %v window %v windows %v, %d changes", cmp.Rule, cmp.Alpha, cmp.WindowS, cmp.Windows, len(cmp.Changes))
	}
	first := cmp.Changes[0]
	for _, k := range []string{"section", "name", "stat", "unit", "base", "other", "change", "change_pct", "p", "tested", "significant", "windows"} {
		if _, ok := first[k]; !ok {
			t.Errorf("change lacks %q: %v", k, first)
		}
	}
}
