package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/latscope/latscope/aggregate"
)

func TestRecordPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path string
		i    int
		want string
	}{
		{"a.lsr", 1, "a-1.lsr"},
		{"dir/run.lsr", 12, "dir/run-12.lsr"},
		{"noext", 2, "noext-2"},
		{"my.dir/noext", 3, "my.dir/noext-3"},
	} {
		if got := recordPath(tc.path, tc.i); got != tc.want {
			t.Errorf("recordPath(%q, %d) = %q, want %q", tc.path, tc.i, got, tc.want)
		}
	}
}

// fakeRuns is a once that prints run i's summary (TTFT p50 100+10i ms)
// and returns outcomes[i], counting the calls and the recordings asked.
type fakeRuns struct {
	outcomes []error
	calls    int
	records  []string
}

func (fr *fakeRuns) once(w io.Writer, record string) error {
	i := fr.calls
	fr.calls++
	fr.records = append(fr.records, record)
	p50 := 100 + 10*float64(i)
	s := aggregate.Summary{TTFT: aggregate.Stats{Count: 5, P50: p50, P99: 2 * p50}, TTFTAnswer: aggregate.Stats{Count: 5, P50: p50, P99: 2 * p50},
		Requests: aggregate.Requests{OK: 5, Sent: 5, ReqPerSec: 2, TokPerSec: 100}}
	if err := aggregate.WriteJSON(w, s); err != nil {
		return err
	}
	if i < len(fr.outcomes) {
		return fr.outcomes[i]
	}
	return nil
}

func TestRepeaterRunsAndReports(t *testing.T) {
	t.Parallel()
	fr := &fakeRuns{}
	r := Repeat{N: 3, Record: "out.lsr", Once: fr.once}
	var stderr bytes.Buffer
	if err := r.runAll(context.Background(), &stderr); err != nil {
		t.Fatal(err)
	}
	if fr.calls != 3 || len(r.summaries) != 3 {
		t.Fatalf("%d runs, %d summaries", fr.calls, len(r.summaries))
	}
	if strings.Join(fr.records, " ") != "out-1.lsr out-2.lsr out-3.lsr" {
		t.Errorf("recordings %v", fr.records)
	}
	var out bytes.Buffer
	if err := r.write(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"run 1: TTFT p50 100.0 ms", "run 3: TTFT p50 120.0 ms", "TTFT p50", "85.16 – 134.8 ms"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	// As JSON: the runs' own summaries and the statistics.
	r.JSON = true
	out.Reset()
	if err := r.write(&out); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Runs     []aggregate.Summary `json:"runs"`
		Repeated struct {
			Headline []struct {
				Name   string    `json:"name"`
				Values []float64 `json:"values"`
				Low    *float64  `json:"ci95_low"`
			} `json:"headline"`
		} `json:"repeated"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(doc.Runs) != 3 || doc.Runs[2].TTFT.P50 != 120 || doc.Repeated.Headline[0].Name != "ttft_p50_ms" ||
		len(doc.Repeated.Headline[0].Values) != 3 || doc.Repeated.Headline[0].Low == nil {
		t.Errorf("JSON:\n%s", out.String())
	}
}

func TestRepeaterOutcomes(t *testing.T) {
	t.Parallel()
	slo := Exit(SLOMissed, errors.New("1 of 1 objectives missed"))
	for _, tc := range []struct {
		name     string
		outcomes []error
		calls    int    // runs started
		kept     int    // summaries kept
		reason   Reason // 0 for none
	}{
		{"an objective missed: the runs go on, exit 2", []error{nil, slo, nil}, 3, 3, SLOMissed},
		{"interrupted: stop, that run left out", []error{nil, Exit(Interrupted, errors.New("interrupted"))}, 2, 1, Interrupted},
		{"all failed: stop, that run kept", []error{Exit(AllFailed, errors.New("all 5 requests failed"))}, 1, 1, AllFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fr := &fakeRuns{outcomes: tc.outcomes}
			r := Repeat{N: 3, Once: fr.once}
			err := r.runAll(context.Background(), io.Discard)
			if reason := ReasonOf(err); fr.calls != tc.calls || len(r.summaries) != tc.kept || reason != tc.reason {
				t.Errorf("calls %d, kept %d, reason %d (%v); want %d, %d, %d", fr.calls, len(r.summaries), reason, err, tc.calls, tc.kept, tc.reason)
			}
		})
	}
	// A context already ended starts no run.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fr := &fakeRuns{}
	r := Repeat{N: 3, Once: fr.once}
	if err := r.runAll(ctx, io.Discard); ReasonOf(err) != Interrupted || fr.calls != 0 {
		t.Errorf("cancelled: %v after %d runs", err, fr.calls)
	}
}
