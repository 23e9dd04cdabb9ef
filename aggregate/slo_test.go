package aggregate

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

func TestParseSLO(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec    string
		want    []Objective
		wantErr string // substring of the error; "" for success
	}{
		{spec: "", want: nil},
		{spec: "ttft.p99<500ms", want: []Objective{{Metric: "ttft.p99", Op: "<", Value: 500, Text: "500ms"}}},
		{
			spec: "ttft.p99<500ms,itl.p99<50ms,e2e.mean<=2s,errors.rate<1%",
			want: []Objective{
				{Metric: "ttft.p99", Op: "<", Value: 500, Text: "500ms"},
				{Metric: "itl.p99", Op: "<", Value: 50, Text: "50ms"},
				{Metric: "e2e.mean", Op: "<=", Value: 2000, Text: "2s"},
				{Metric: "errors.rate", Op: "<", Value: 0.01, Text: "1%"},
			},
		},
		{spec: " tpot.max >= 1.5ms , requests.ok>100 ", want: []Objective{
			{Metric: "tpot.max", Op: ">=", Value: 1.5, Text: "1.5ms"},
			{Metric: "requests.ok", Op: ">", Value: 100, Text: "100"},
		}},
		{spec: "errors.rate<=0.05", want: []Objective{{Metric: "errors.rate", Op: "<=", Value: 0.05, Text: "0.05"}}},
		{spec: "ttft.p99<", wantErr: `invalid SLO "ttft.p99<": missing value`},
		{spec: "ttft.p99", wantErr: `invalid SLO "ttft.p99": missing comparison`},
		{spec: "<5ms", wantErr: "missing metric"},
		{spec: "ttft.p97<5ms", wantErr: `unknown statistic "p97"`},
		{spec: "latency.p99<5ms", wantErr: `unknown metric "latency.p99"`},
		{spec: "ttft.p99<500", wantErr: "want a duration such as 500ms"},
		{spec: "ttft.p99<-5ms", wantErr: "negative duration"},
		{spec: "errors.rate<120%", wantErr: "outside 0..100%"},
		{spec: "errors.rate<NaN", wantErr: "want a rate"},
		{spec: "requests.ok>1.5", wantErr: "whole number"},
		{spec: "ttft.p99<5ms,,itl.p99<1ms", wantErr: `invalid SLO "": empty objective`},
		{spec: "ttft.p99<<5ms", wantErr: "want a duration"},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			t.Parallel()
			got, err := ParseSLO(tc.spec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d objectives %+v, want %+v", len(got), got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("objective %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestEvaluateSLO(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	for i := 1; i <= 100; i++ {
		addAll(a, okReq(base(), time.Duration(i)*time.Millisecond, 10*time.Millisecond, 3))
	}
	addAll(a, errReq(base(), event.OutcomeTimeout, 0))
	s := a.Summary()
	tests := []struct {
		spec    string
		pass    bool
		gotText string
		noData  bool
	}{
		{spec: "ttft.p99<=100ms", pass: true, gotText: "99.01ms"},
		{spec: "ttft.p99<50ms", pass: false},
		{spec: "ttft.max<=100ms", pass: true, gotText: "100.00ms"},
		{spec: "itl.mean<11ms", pass: true},
		{spec: "e2e.p50>60ms", pass: true}, // e2e = ttft + 20 ms: 21..120 ms
		{spec: "errors.rate<1%", pass: true, gotText: "0.99%"},
		{spec: "errors.rate<0.5%", pass: false},
		{spec: "requests.ok>=100", pass: true, gotText: "100"},
		{spec: "requests.ok>100", pass: false},
	}
	for _, tc := range tests {
		objs, err := ParseSLO(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		r := Evaluate(s, objs)[0]
		if r.Pass != tc.pass || r.Metric != objs[0].Metric || r.Want != tc.spec[len(objs[0].Metric):] {
			t.Errorf("%s: %+v, want pass=%t", tc.spec, r, tc.pass)
		}
		if tc.gotText != "" && r.GotText != tc.gotText {
			t.Errorf("%s: got text %q, want %q", tc.spec, r.GotText, tc.gotText)
		}
	}
	// No data fails rather than passing vacuously.
	objs, _ := ParseSLO("tpot.p99<1s,errors.rate<1%")
	for _, r := range Evaluate(New(Config{}).Summary(), objs) {
		if r.Pass || r.GotText != "no data" || !math.IsNaN(r.Got) {
			t.Errorf("empty run: %+v, want a failure with no data", r)
		}
	}
}

func FuzzParseSLO(f *testing.F) {
	for _, s := range []string{
		"ttft.p99<500ms,itl.p99<50ms,e2e.mean<=2s,errors.rate<1%", "requests.ok>=10", "ttft.p99<", ",", "errors.rate< 1 %",
		"tpot.max>1h", "e2e.p50<=9223372036854775807ns", "itl.p90>=0.5µs",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		objs, err := ParseSLO(spec)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "invalid SLO") {
				t.Fatalf("error %q does not start with \"invalid SLO\"", err)
			}
			return
		}
		// What parsed must print back to something that parses the same.
		parts := make([]string, len(objs))
		for i, o := range objs {
			if math.IsNaN(o.Value) || o.Value < 0 {
				t.Fatalf("bad value in %+v", o)
			}
			parts[i] = o.String()
		}
		again, err := ParseSLO(strings.Join(parts, ","))
		if err != nil {
			t.Fatalf("reparse of %q: %v", strings.Join(parts, ","), err)
		}
		for i := range objs {
			if again[i] != objs[i] {
				t.Fatalf("reparse changed %+v to %+v", objs[i], again[i])
			}
		}
		_ = Evaluate(Summary{}, objs)
	})
}

func TestGoodputCountsRequestsMeetingEveryObjective(t *testing.T) {
	t.Parallel()
	objectives, err := ParseSLO("ttft.p99<100ms,itl.p50<20ms,e2e.max<=1s,errors.rate<5%")
	if err != nil {
		t.Fatal(err)
	}
	a := New(Config{SLO: objectives})
	t0 := base()
	wantGood := 0
	for i := range 40 {
		ttft := time.Duration(50+i*2) * time.Millisecond // 50..128 ms: the last 10 miss the TTFT limit
		itl := 10 * time.Millisecond
		if i%7 == 0 {
			itl = 30 * time.Millisecond // misses the ITL limit
		}
		r := okReq(t0.Add(time.Duration(i)*100*time.Millisecond), ttft, itl, 10)
		if ttft < 100*time.Millisecond && itl < 20*time.Millisecond {
			wantGood++
		}
		addAll(a, r)
	}
	addAll(a, errReq(t0.Add(time.Second), event.OutcomeTimeout, 0)) // failed: never good
	snap := a.Snapshot(t0.Add(5 * time.Second))
	run := snap.Windows[WinRun]
	if run.Good != int64(wantGood) {
		t.Fatalf("good = %d, want %d", run.Good, wantGood)
	}
	if want := float64(wantGood) / run.Span.Seconds(); math.Abs(run.GoodPerSec-want) > 1e-9 {
		t.Errorf("goodput %.4f/s, want good / window span = %.4f/s", run.GoodPerSec, want)
	}
	sum := snap.Summary()
	if sum.Requests.Good == nil || *sum.Requests.Good != int64(wantGood) {
		t.Errorf("summary good = %v, want %d", sum.Requests.Good, wantGood)
	}
	if w := snap.Windows[Win10s]; w.Good != int64(wantGood) || w.GoodPerSec <= 0 {
		t.Errorf("10 s window good %d (%.2f/s), want %d", w.Good, w.GoodPerSec, wantGood)
	}
	if New(Config{}).Summary().Requests.Good != nil {
		t.Error("goodput reported without objectives")
	}
}

// An objective built by hand with a comparison or metric ParseSLO refuses
// is refused the same way by every evaluation, never passed or guessed.
func TestInvalidObjectivesAreRefusedEverywhere(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	for i := 1; i <= 20; i++ {
		addAll(a, okReq(base(), time.Duration(i)*time.Millisecond, time.Millisecond, 2))
	}
	s := a.Summary()
	win := a.Snapshot(a.Latest()).Windows[Win10s]
	bad := []Objective{
		{Metric: "ttft.p99", Op: "=", Value: 5, Text: "5ms"},
		{Metric: "ttft.p99", Op: "", Value: 5, Text: "5ms"},
		{Metric: "latency.p99", Op: "<", Value: 5, Text: "5ms"},
		{Metric: "ttft.p97", Op: "<", Value: 5, Text: "5ms"},
	}
	for _, o := range bad {
		err := o.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), "invalid SLO") {
			t.Errorf("%+v: Validate = %v, want an invalid-SLO error", o, err)
		}
		if _, perr := ParseSLO(o.String()); perr == nil {
			t.Errorf("ParseSLO(%q) accepted what Validate refuses", o.String())
		}
		for _, r := range append(Evaluate(s, []Objective{o}), EvaluateWindow(&win, []Objective{o})...) {
			if r.Pass || r.Judged || r.Broken() || r.GotText != err.Error() {
				t.Errorf("%+v evaluated to %+v, want refused with %q", o, r, err)
			}
		}
	}
}

func TestEvaluateWindowJudgesCountsOnlyOverTheRun(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	for i := range 30 {
		addAll(a, okReq(base().Add(time.Duration(i)*time.Second), 50*time.Millisecond, time.Millisecond, 2))
	}
	addAll(a, errReq(base().Add(29*time.Second), event.OutcomeTimeout, 0))
	snap := a.Snapshot(a.Latest())
	objs, _ := ParseSLO("requests.ok>=20,errors.rate<5%,ttft.p50<40ms")
	run := EvaluateWindow(&snap.Windows[WinRun], objs)
	last := EvaluateWindow(&snap.Windows[Win10s], objs)
	if !run[0].Judged || !run[0].Pass || last[0].Judged || last[0].GotText != "whole run only" {
		t.Errorf("requests.ok: run %+v, 10 s %+v", run[0], last[0])
	}
	// 1 error in 31 over the run passes; 1 in 10 over the last 10 s does not.
	if !run[1].Pass || !last[1].Broken() {
		t.Errorf("errors.rate: run %+v, 10 s %+v", run[1], last[1])
	}
	if !run[2].Broken() || !last[2].Broken() {
		t.Errorf("ttft.p50: run %+v, 10 s %+v", run[2], last[2])
	}
	// The whole run judged on the snapshot or on its summary agrees.
	for i, r := range Evaluate(a.Summary(), objs) {
		if r.Pass != run[i].Pass || r.GotText != run[i].GotText {
			t.Errorf("%s: summary %+v, run window %+v", objs[i], r, run[i])
		}
	}
}
