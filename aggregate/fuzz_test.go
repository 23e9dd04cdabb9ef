package aggregate

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// FuzzAddEvent feeds any decodable event (hostile numbers included) through
// Add, a snapshot and both report writers: none may panic, and the JSON
// report must stay valid.
func FuzzAddEvent(f *testing.F) {
	seed := []*event.Request{
		okReq(base(), 100*time.Millisecond, 10*time.Millisecond, 4),
		{Outcome: event.OutcomeOK, TTFT: -1, E2E: 1 << 62, OutputTokens: -5, Chunks: []event.Chunk{{At: 1 << 62}, {At: -1 << 62}}},
		{Outcome: "weird", Status: -1, Intended: base(), SchedLag: -time.Hour, Breakdown: []event.StageTiming{{Stage: "", Duration: -1}}},
	}
	for _, r := range seed {
		b, err := event.Marshal(event.NewRequest(r))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, e := range []event.Event{
		event.NewServer(&event.ServerSample{Time: base(), Waiting: ptr(3), Stages: map[string]event.HistStat{"queue": {Count: 1, Mean: 1}}}),
		event.NewMarker(&event.Marker{Time: base(), Kind: "x", Values: map[string]float64{"a": 1}}),
		event.NewGPU(&event.GPUSample{Time: base(), Available: true}),
	} {
		b, err := event.Marshal(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := event.Unmarshal(data)
		if err != nil {
			return
		}
		a := New(Config{})
		a.Add(ev)
		a.Add(ev) // twice: the second goes through existing slots
		snap := a.Snapshot(a.Latest())
		_ = StatusLine(snap)
		var buf bytes.Buffer
		if err := WriteJSON(&buf, snap.Summary()); err != nil {
			t.Fatalf("WriteJSON: %v", err)
		}
		if !json.Valid(buf.Bytes()) {
			t.Fatalf("invalid JSON report: %s", buf.Bytes())
		}
		if err := WriteTable(&bytes.Buffer{}, snap.Summary()); err != nil {
			t.Fatalf("WriteTable: %v", err)
		}
	})
}
