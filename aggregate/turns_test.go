package aggregate

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// turnReq is a successful turn of a conversation with prompt tokens of
// which cached came from the server's cache.
func turnReq(at time.Time, turn, prompt, cached int, ttft, prefill time.Duration) *event.Request {
	r := okReq(at, ttft, 10*time.Millisecond, 4)
	r.Session, r.Turn, r.PromptTokens = "s1", turn, prompt
	r.Server = &event.ServerTiming{Source: "usage", CachedTokens: cached, Stages: map[event.Stage]time.Duration{event.StagePrefill: prefill}}
	return r
}

func TestTurnsTablesByTurnAndCachedShare(t *testing.T) {
	a := New(Config{})
	at := base()
	// Turn k: 100k prompt tokens, all but the last 100 cached; 1 ms per
	// uncached token of prefill and 2 ms of TTFT.
	for k := 1; k <= 3; k++ {
		prompt := 100 * k
		addAll(a, turnReq(at.Add(time.Duration(k)*time.Second), k, prompt, prompt-100, 200*time.Millisecond, 100*time.Millisecond))
	}
	s := a.Final().Summary()
	tu := s.Turns
	if tu == nil || len(tu.ByTurn) != 3 {
		t.Fatalf("turns %+v", tu)
	}
	for i, r := range tu.ByTurn {
		if r.Count != 1 || r.CachedTokens != float64(100*i) || r.TTFTPerUncached != 2 || r.PrefillPerUncached == nil || *r.PrefillPerUncached != 1 {
			t.Errorf("turn %s: %+v", r.Label, r)
		}
	}
	var labels []string
	for _, r := range tu.ByCachedShare {
		labels = append(labels, r.Label)
	}
	if got := strings.Join(labels, " "); got != "0% >25-50% >50-75%" {
		t.Errorf("cached-share rows %q", got)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "By conversation turn") || !strings.Contains(b.String(), "By cached share") {
		t.Errorf("table lacks the turn tables:\n%s", b.String())
	}
	if lines := TurnLines(tu); len(lines) != 1 || !strings.Contains(lines[0], "3: 200 /") {
		t.Errorf("turn lines %q", lines)
	}
}

func TestAbandonedAreCountedApartAndOutOfLatency(t *testing.T) {
	a := New(Config{})
	at := base()
	ok := okReq(at, 100*time.Millisecond, 10*time.Millisecond, 4)
	ab := okReq(at.Add(time.Second), 900*time.Millisecond, 10*time.Millisecond, 4)
	ab.Outcome = event.OutcomeAbandoned
	ab.Abandon = &event.Abandon{Rule: "tokens=4", At: time.Second, Release: 3 * time.Millisecond, ReleaseSource: "metrics:vllm:num_requests_running"}
	unwatched := okReq(at.Add(2*time.Second), 900*time.Millisecond, 10*time.Millisecond, 4)
	unwatched.Outcome = event.OutcomeAbandoned
	unwatched.Abandon = &event.Abandon{Rule: "tokens=4", At: time.Second}
	addAll(a, ok, ab, unwatched)
	s := a.Final().Summary()
	r := s.Requests
	if r.Sent != 3 || r.OK != 1 || r.Errors != 0 || r.Abandoned != 2 || len(r.ByOutcome) != 0 {
		t.Fatalf("requests %+v", r)
	}
	if s.TTFT.Count != 1 || s.TTFT.Max > 101 {
		t.Errorf("an abandoned request's TTFT reached the statistics: %+v", s.TTFT)
	}
	ab2 := s.Abandoned
	if ab2 == nil || ab2.Count != 2 || ab2.Measured() != 1 || ab2.Release.P50 < 2.9 || ab2.Release.P50 > 3.1 ||
		ab2.Rules["tokens=4"] != 2 || ab2.Unmeasured["not watched"] != 1 {
		t.Fatalf("abandoned %+v", ab2)
	}
	js, err := json.Marshal(s)
	if err != nil || !strings.Contains(string(js), `"abandoned":2`) || !strings.Contains(string(js), `"release"`) {
		t.Errorf("json %s %v", js, err)
	}
	if line := StatusLine(a.Snapshot(at.Add(3 * time.Second))); !strings.Contains(line, "abandoned 2") {
		t.Errorf("status line %q", line)
	}
}
