package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync/atomic"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/recorder"
)

// Recording writes the session to a file: a lossless consumer of the
// fan-out, so it gets every event; if the disk cannot keep up, the run says
// so instead of dropping anything.
type Recording struct {
	path string
	w    *recorder.Writer
	sub  atomic.Pointer[pipeline.Subscription]
	// announced counts the unrecorded events already announced with a
	// Loss record (see recordfail.go).
	announced atomic.Int64
}

// NewRecording creates the file now, so a bad path fails before measuring.
func NewRecording(path string, header *event.Session, overwrite bool) (*Recording, error) {
	w, err := recorder.Create(path, header, recorder.Options{Overwrite: overwrite})
	if err != nil {
		return nil, fmt.Errorf("--record: %w", err)
	}
	return &Recording{path: path, w: w}, nil
}

func (r *Recording) Start(ctx context.Context, fan *pipeline.Fanout) func() error {
	sub := fan.Subscribe("recorder", 1<<16, pipeline.Lossless)
	r.sub.Store(sub)
	done := make(chan error, 1)
	go func() { done <- r.w.Record(ctx, sub.Events()) }()
	return func() error {
		err := <-done
		if cerr := r.w.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		if err != nil {
			return fmt.Errorf("recording %s: %w", r.path, err)
		}
		return nil
	}
}

// WarnWhenBehind returns a snapshot observer that prints a line when the
// recorder falls behind (the disk is slower than the events) and when the
// fan-out had to wait for it.
func (r *Recording) WarnWhenBehind(w io.Writer) func(aggregate.Snapshot) {
	var lastWarn time.Time
	var lastBlocked time.Duration
	return func(aggregate.Snapshot) {
		st := r.w.Stats()
		var blocked time.Duration
		if sub := r.sub.Load(); sub != nil {
			blocked = sub.Stats().Blocked
		}
		if !st.Behind && blocked == lastBlocked || time.Since(lastWarn) < 5*time.Second {
			return
		}
		lastWarn, lastBlocked = time.Now(), blocked
		fmt.Fprintf(w, "latscope: recording is behind: the last write took %s, measuring waited %s in all for the disk\n",
			st.LastWrite.Round(time.Millisecond), blocked.Round(time.Millisecond))
	}
}

// recordLossEvery is the least time between two Loss records, and between
// two lines, about a failing recording: a full disk fails every frame.
const recordLossEvery = time.Second

// Losses is an aux source that announces, in the stream, the events the
// recording could not write (see lossSource); stamp dates the records.
func (r *Recording) Losses(stamp func() time.Time) pipeline.Source {
	return lossSource(r.w.Failed(), recordLossEvery, false, r.unannounced, stamp)
}

// unannounced returns a Loss record for the unrecorded events no record has
// announced yet, and counts them as announced.
func (r *Recording) unannounced(at time.Time) (event.Event, bool) {
	st := r.w.Stats()
	n := st.Unwritten - r.announced.Load()
	if n <= 0 {
		return event.Event{}, false
	}
	r.announced.Add(n)
	return event.NewLoss(&event.Loss{Time: at, Consumer: event.ConsumerRecorder, Events: n,
		Reason: fmt.Sprintf("recording to %s failed: %s", r.path, rootCause(st.Err))}), true
}

// LateEvents announces what the recording's last frame, written after the
// stream ended, could not write: Measurement.Run gives it to the
// aggregator before the summary is taken.
func (r *Recording) LateEvents() []event.Event {
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

// WarnWhenFailing returns a snapshot observer that says, on w, the first
// failed write at once, and then, at most once every recordLossEvery, how
// many events are not recorded so far as the count grows. now is the
// clock of the rate limit.
func (r *Recording) WarnWhenFailing(w io.Writer, now func() time.Time) func(aggregate.Snapshot) {
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

// Failure says how the recording failed; "" while it has not.
func (r *Recording) Failure() string {
	st := r.w.Stats()
	if st.Unwritten == 0 {
		return ""
	}
	return r.failureText(st)
}

func (r *Recording) failureText(st recorder.Stats) string {
	return fmt.Sprintf("recording to %s failed: %s; %d events not recorded so far%s",
		r.path, rootCause(st.Err), st.Unwritten, brokenNote(st.Broken))
}

func brokenNote(broken bool) string {
	if broken {
		return " (the file ends at the failure: nothing more is written to it)"
	}
	return " (later frames are still tried)"
}

// RecordSession records the session from events until a new session's
// header arrives (an agent that restarted), which it returns, or events
// closes: see recorder.Writer.RecordSession.
func (r *Recording) RecordSession(ctx context.Context, events <-chan event.Event) (*event.Session, error) {
	return r.w.RecordSession(ctx, events)
}
