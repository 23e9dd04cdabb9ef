package session

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

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
	exp, err := NewTraceExport(ctx, io.Discard, collector.URL, time.Second)
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
		srcDone <- exp.Losses(time.Now).Run(srcCtx, func(ev event.Event) { lossc <- ev })
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
	for _, ev := range exp.LateEvents() {
		late += ev.Loss.Events
	}
	st := exp.exp.Stats()
	if late <= 0 || uint64(live.Loss.Events+late) != st.Failed+st.Dropped {
		t.Errorf("announced %d live and %d late, want every lost span once (%d failed, %d dropped)",
			live.Loss.Events, late, st.Failed, st.Dropped)
	}
	if again := exp.LateEvents(); len(again) != 0 {
		t.Errorf("a second look announced %v again", again)
	}
}
