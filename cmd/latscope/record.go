package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/recorder"
)

// recording writes the session to a file: a lossless consumer of the
// fan-out, so it gets every event; if the disk cannot keep up, the run says
// so instead of dropping anything.
type recording struct {
	path string
	w    *recorder.Writer
	sub  atomic.Pointer[pipeline.Subscription]
	// announced counts the unrecorded events already announced with a
	// Loss record (see recordfail.go).
	announced atomic.Int64
}

// newRecording creates the file now, so a bad path fails before measuring.
func newRecording(path string, header *event.Session, overwrite bool) (*recording, error) {
	w, err := recorder.Create(path, header, recorder.Options{Overwrite: overwrite})
	if err != nil {
		return nil, fmt.Errorf("--record: %w", err)
	}
	return &recording{path: path, w: w}, nil
}

func (r *recording) start(ctx context.Context, fan *pipeline.Fanout) func() error {
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

// warnWhenBehind returns a snapshot observer that prints a line when the
// recorder falls behind (the disk is slower than the events) and when the
// fan-out had to wait for it.
func (r *recording) warnWhenBehind(w io.Writer) func(aggregate.Snapshot) {
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
