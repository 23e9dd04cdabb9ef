package session

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/otlpexport"
	"github.com/latscope/latscope/pipeline"
)

// TraceExport sends each request to an OpenTelemetry collector as a trace.
// It is a lossy consumer: a slow or absent collector costs dropped spans
// (counted), never measuring time, and at most the flush deadline at the
// end.
type TraceExport struct {
	exp    *otlpexport.Exporter
	sub    *pipeline.Subscription
	stderr io.Writer
	// stop is the command's context: a signal after the run's end cuts the
	// final wait for the collector short.
	stop context.Context

	mu       sync.Mutex // failure lines, from the exporter's goroutine
	lastSaid time.Time
	unsaid   int // failed spans since the last line

	failedc   chan struct{} // signalled by each failed export
	announced uint64        // spans lost that a Loss record announced
}

// failureEvery bounds the failure lines: a dead collector fails every
// export, and one line a second would bury everything else.
const failureEvery = 10 * time.Second

func NewTraceExport(ctx context.Context, stderr io.Writer, endpoint string, flushTimeout time.Duration) (*TraceExport, error) {
	t := &TraceExport{stderr: stderr, stop: ctx, failedc: make(chan struct{}, 1)}
	exp, err := otlpexport.New(ctx, otlpexport.Config{
		Endpoint: endpoint, FlushTimeout: flushTimeout,
		OnFailure: t.failed,
		OnFlush: func(d time.Duration, spans int) {
			fmt.Fprintf(stderr, "latscope: waiting up to %s for the OTLP collector at %s to take %d spans (--flush-timeout; Ctrl-C to stop waiting)\n",
				d, t.exp.Endpoint(), spans)
		},
	})
	if err != nil {
		return nil, err
	}
	t.exp = exp
	return t, nil
}

// failed says an export failed, at most once per failureEvery; the spans
// of the exports in between are added to the next line.
func (t *TraceExport) failed(err error, spans int) {
	select {
	case t.failedc <- struct{}{}:
	default:
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unsaid += spans
	if now := time.Now(); now.Sub(t.lastSaid) >= failureEvery {
		fmt.Fprintf(t.stderr, "latscope: OTLP export to %s failed: %v (%d spans lost; %d in all)\n",
			t.exp.Endpoint(), err, t.unsaid, t.exp.Stats().Failed)
		t.lastSaid, t.unsaid = now, 0
	}
}

func (t *TraceExport) Start(_ context.Context, fan *pipeline.Fanout) func() error {
	t.sub = fan.Subscribe("otlp export", 1<<14, pipeline.Lossy)
	done := make(chan error, 1)
	go func() { done <- t.exp.Run(t.stop, t.sub.Events()) }()
	return func() error {
		err := <-done
		t.report()
		if st := t.exp.Stats(); err == nil && st.Requests > 0 && st.Spans == 0 {
			// Nothing reached the collector: the export, asked for, did
			// not happen (a partial loss stays counted, the exit unchanged).
			err = fmt.Errorf("OTLP export to %s: none of %d requests' spans reached the collector", t.exp.Endpoint(), st.Requests)
		}
		return err
	}
}

// exportLossEvery is the least time between two Loss records about the
// export; a dead collector fails every batch.
const exportLossEvery = time.Second

// Losses is an aux source that announces, in the stream, the spans the
// collector did not get (see lossSource), looking on every beat too: a full
// queue drops without a failure. stamp dates the records.
func (t *TraceExport) Losses(stamp func() time.Time) pipeline.Source {
	return lossSource(t.failedc, exportLossEvery, true, t.unannounced, stamp)
}

// unannounced returns a Loss record for the spans lost since the last
// record, and counts them as announced. Only the pipeline's aux goroutine
// and, after the pipeline ended, LateEvents call it.
func (t *TraceExport) unannounced(at time.Time) (event.Event, bool) {
	st := t.exp.Stats()
	lost := st.Failed + st.Dropped
	if lost <= t.announced {
		return event.Event{}, false
	}
	n := lost - t.announced
	t.announced = lost
	reason := fmt.Sprintf("OTLP export to %s: %d spans in failed exports, %d not sent", t.exp.Endpoint(), st.Failed, st.Dropped)
	if st.LastErr != "" {
		reason += " (last error: " + st.LastErr + ")"
	}
	return event.NewLoss(&event.Loss{Time: at, Consumer: event.ConsumerExport, Events: int64(n), Reason: reason}), true
}

// LateEvents gives the aggregator, after the run, the spans lost since the
// last Loss record (the final flush's), so the summary and --json count
// every one.
func (t *TraceExport) LateEvents() []event.Event {
	if ev, ok := t.unannounced(time.Time{}); ok {
		return []event.Event{ev}
	}
	return nil
}

// report says, once the export is over, how much of the run reached the
// collector.
func (t *TraceExport) report() {
	st := t.exp.Stats()
	line := fmt.Sprintf("latscope: OTLP export to %s: %d spans of %d requests sent", t.exp.Endpoint(), st.Spans, st.Requests)
	if st.Failed > 0 {
		line += fmt.Sprintf(", %d in failed exports (last: %s)", st.Failed, st.LastErr)
	}
	if st.Dropped > 0 {
		line += fmt.Sprintf(", %d not sent (the collector was behind or the flush deadline passed)", st.Dropped)
	}
	if lost := t.sub.Stats().Dropped; lost > 0 {
		line += fmt.Sprintf(", %d requests not exported (the exporter was behind)", lost)
	}
	fmt.Fprintln(t.stderr, line)
}
