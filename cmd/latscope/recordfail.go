package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/recorder"
)

// recordLossEvery is the least time between two Loss records, and between
// two lines, about a failing recording: a full disk fails every frame.
const recordLossEvery = time.Second

// losses is an aux source that announces, in the stream, the events the
// recording could not write: a Loss record at the first failure, then at
// most one every recordLossEvery while the count grows. The aggregator
// counts them for the summary, an agent publishes them on its feed, and a
// recording that gets room again writes them too. stamp dates the records.
func (r *recording) losses(stamp func() time.Time) pipeline.Source {
	return pipeline.SourceFunc(func(ctx context.Context, emit func(event.Event)) error {
		for {
			select {
			case <-r.w.Failed():
			case <-ctx.Done():
				// The pipeline waits for aux sources before it closes, so
				// what failed until now still goes in.
				r.announce(stamp(), emit)
				return nil
			}
			r.announce(stamp(), emit)
			t := time.NewTimer(recordLossEvery)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
	})
}

// announce emits a Loss record for the events not yet announced.
func (r *recording) announce(at time.Time, emit func(event.Event)) {
	if ev, ok := r.unannounced(at); ok {
		emit(ev)
	}
}

// unannounced returns a Loss record for the unrecorded events no record has
// announced yet, and counts them as announced.
func (r *recording) unannounced(at time.Time) (event.Event, bool) {
	st := r.w.Stats()
	n := st.Unwritten - r.announced.Load()
	if n <= 0 {
		return event.Event{}, false
	}
	r.announced.Add(n)
	return event.NewLoss(&event.Loss{Time: at, Consumer: event.ConsumerRecorder, Events: n,
		Reason: fmt.Sprintf("recording to %s failed: %s", r.path, rootCause(st.Err))}), true
}

// lateEvents announces what the recording's last frame, written after the
// stream ended, could not write: measurement.run gives it to the
// aggregator before the summary is taken.
func (r *recording) lateEvents() []event.Event {
	if ev, ok := r.unannounced(time.Time{}); ok {
		return []event.Event{ev}
	}
	return nil
}

// rootCause is the operating system's reason for a failed file operation
// ("no space left on device"), else err's whole text.
func rootCause(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	if err == nil {
		return "unknown error"
	}
	return err.Error()
}

// warnWhenFailing returns a snapshot observer that says, on w, the first
// failed write at once, and then, at most once every recordLossEvery, how
// many events are not recorded so far as the count grows. now is the
// clock of the rate limit.
func (r *recording) warnWhenFailing(w io.Writer, now func() time.Time) func(aggregate.Snapshot) {
	var said int64
	var lastSaid time.Time
	return func(aggregate.Snapshot) {
		st := r.w.Stats()
		if st.Unwritten == said || said > 0 && now().Sub(lastSaid) < recordLossEvery {
			return
		}
		said, lastSaid = st.Unwritten, now()
		fmt.Fprintf(w, "latscope: %s\n", r.failureText(st))
	}
}

// failure says how the recording failed; "" while it has not.
func (r *recording) failure() string {
	st := r.w.Stats()
	if st.Unwritten == 0 {
		return ""
	}
	return r.failureText(st)
}

func (r *recording) failureText(st recorder.Stats) string {
	return fmt.Sprintf("recording to %s failed: %s; %d events not recorded so far%s",
		r.path, rootCause(st.Err), st.Unwritten, brokenNote(st.Broken))
}

func brokenNote(broken bool) string {
	if broken {
		return " (the file ends at the failure: nothing more is written to it)"
	}
	return " (later frames are still tried)"
}
