package main

import (
	"context"
	"io"
	"time"

	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/latscope/latscope/event"
)

// TestExportFailuresAreCountedInTheSummary: a collector that answers 500
// to every export costs spans, and the summary (table and --json) counts
// them with the collector's answer, besides the lines said as it happened.
func TestExportFailuresAreCountedInTheSummary(t *testing.T) {
	t.Parallel()
	var exports atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		exports.Add(1)
		http.Error(w, "collector is broken", http.StatusInternalServerError)
	}))
	t.Cleanup(collector.Close)
	url := serveTinySim(t)

	stdout, stderr, err := execute(t, "run", "--url", url, "-n", "6", "-c", "2", "--no-tui", "--json",
		"--otlp-export", collector.URL, "--flush-timeout", "2s")
	// Every span lost: the summary is printed, and the run exits 1.
	if code := exitCode(io.Discard, err, nil); code != exitFailure || !strings.Contains(err.Error(), "none of 6 requests' spans reached the collector") {
		t.Fatalf("run: exit %d (%v), want %d and the spans lost\n%s", code, err, exitFailure, stderr)
	}
	if exports.Load() == 0 {
		t.Fatal("no export reached the collector")
	}
	var got struct {
		Unexported *struct {
			Events int64  `json:"events"`
			Reason string `json:"reason"`
		} `json:"unexported"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("summary: %v\n%s", err, stdout)
	}
	if got.Unexported == nil || got.Unexported.Events == 0 {
		t.Fatalf("the summary does not count the spans the collector refused:\n%s", stdout)
	}
	if !strings.Contains(got.Unexported.Reason, "500") {
		t.Errorf("reason %q does not name the collector's answer", got.Unexported.Reason)
	}
	if !strings.Contains(stderr, "OTLP export to") || !strings.Contains(stderr, "failed") {
		t.Errorf("stderr does not say the export failed:\n%s", stderr)
	}
}

// TestExportLossesAreAnnouncedAsTheyHappen: a failed export becomes a Loss
// record in the stream while the run goes on (so the dashboard warns, the
// recording keeps it and an agent publishes it), and what is lost after
// the last record comes after the run, each span counted once.
func TestExportLossesAreAnnouncedAsTheyHappen(t *testing.T) {
	t.Parallel()
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "collector is broken", http.StatusInternalServerError)
	}))
	t.Cleanup(collector.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exp, err := newTraceExport(ctx, io.Discard, collector.URL, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	requests := make(chan event.Event, 4)
	ran := make(chan error, 1)
	go func() { ran <- exp.exp.Run(ctx, requests) }()
	oneRequest := func(id string) {
		requests <- event.NewRequest(&event.Request{ID: id, Start: time.Now(), E2E: time.Millisecond, Outcome: event.OutcomeOK})
	}

	lossc := make(chan event.Event, 8)
	srcCtx, stopSrc := context.WithCancel(ctx)
	srcDone := make(chan error, 1)
	go func() {
		srcDone <- exp.losses(time.Now).Run(srcCtx, func(ev event.Event) { lossc <- ev })
	}()
	oneRequest("a")
	var live event.Event
	select {
	case live = <-lossc:
	case <-ctx.Done():
		t.Fatal("no Loss record while the run went on")
	}
	if live.Loss == nil || live.Loss.Consumer != event.ConsumerExport || live.Loss.Events <= 0 || !strings.Contains(live.Loss.Reason, "500") {
		t.Fatalf("live loss %+v, want the export's spans with the collector's answer", live.Loss)
	}
	stopSrc()
	if err := <-srcDone; err != nil {
		t.Fatal(err)
	}
	for len(lossc) > 0 {
		ev := <-lossc
		live.Loss.Events += ev.Loss.Events
	}

	oneRequest("b")
	close(requests)
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	var late int64
	for _, ev := range exp.lateEvents() {
		late += ev.Loss.Events
	}
	st := exp.exp.Stats()
	if late <= 0 || uint64(live.Loss.Events+late) != st.Failed+st.Dropped {
		t.Errorf("announced %d live and %d late, want every lost span once (%d failed, %d dropped)",
			live.Loss.Events, late, st.Failed, st.Dropped)
	}
	if again := exp.lateEvents(); len(again) != 0 {
		t.Errorf("a second look announced %v again", again)
	}
}
