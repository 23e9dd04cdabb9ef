package session

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/recorder"
)

// diskFullAfter accepts so many bytes, then fails every write with ENOSPC
// and writes nothing, as a full filesystem does.
type diskFullAfter struct {
	mu   sync.Mutex
	room int
}

func (d *diskFullAfter) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(p) > d.room {
		return 0, &os.PathError{Op: "write", Path: "rec.lsr", Err: syscall.ENOSPC}
	}
	d.room -= len(p)
	return len(p), nil
}

// lines is an io.Writer that keeps what is written and signals each write.
type lines struct {
	mu    sync.Mutex
	text  strings.Builder
	wrote chan struct{}
}

func newLines() *lines { return &lines{wrote: make(chan struct{}, 1)} }

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.text.Write(p)
	l.mu.Unlock()
	select {
	case l.wrote <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.String()
}

// A recording whose disk fills mid-run says so while the run goes on, the
// Loss records announce it in the stream, and the summary counts exactly
// the events the writer could not write.
func TestRecordingFailureIsSaidAsItHappensAndCounted(t *testing.T) {
	t.Parallel()
	header := &event.Session{Time: time.Now(), Target: "http://x", Load: event.Load{Mode: "closed"}}
	w, err := recorder.NewWriter(&diskFullAfter{room: 512}, header, recorder.Options{FlushInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rec := &Recording{path: "rec.lsr", w: w}
	said := newLines()
	// The source goes on until the failure has been said, as a real run
	// would, so the failure is met mid-run and not only at the end.
	var sent int
	source := pipeline.SourceFunc(func(ctx context.Context, emit func(event.Event)) error {
		deadline := time.NewTimer(30 * time.Second)
		defer deadline.Stop()
		for {
			for range 50 {
				sent++
				at := time.Now()
				emit(event.NewRequest(&event.Request{ID: strconv.Itoa(sent), Start: at, Intended: at, Outcome: event.OutcomeOK}))
			}
			if strings.Contains(said.String(), "failed") {
				return nil
			}
			select {
			case <-said.wrote:
			case <-time.After(20 * time.Millisecond):
			case <-deadline.C:
				return errors.New("the failure was never said")
			}
		}
	})
	seen := &lossTap{}
	m := Measurement{
		Pipe:      pipeline.Config{Header: header, Primary: []pipeline.Source{source}, Aux: []pipeline.Source{rec.Losses(time.Now)}},
		Agg:       aggregate.Config{Now: time.Now},
		Observers: []func(aggregate.Snapshot){rec.WarnWhenFailing(said, time.Now)},
		Consumers: []Consumer{rec, seen},
	}
	summary, _, err := m.Run(context.Background())
	st := w.Stats()
	if err == nil || !strings.Contains(err.Error(), strconv.FormatInt(st.Unwritten, 10)+" events not recorded") {
		t.Fatalf("run = %v, want the count of events not recorded (%d)", err, st.Unwritten)
	}
	if !regexp.MustCompile(`recording to rec.lsr failed: no space left on device; \d+ events not recorded so far`).MatchString(said.String()) {
		t.Errorf("the failure was not said as it happened:\n%s", said.String())
	}
	if summary.Unrecorded == nil || summary.Unrecorded.Events != st.Unwritten || st.Unwritten == 0 {
		t.Fatalf("summary unrecorded %+v, writer %d: want the same, not 0", summary.Unrecorded, st.Unwritten)
	}
	if !strings.Contains(summary.Unrecorded.Reason, "no space left on device") {
		t.Errorf("reason %q", summary.Unrecorded.Reason)
	}
	if seen.n.Load() == 0 {
		t.Error("no Loss record of the recorder's reached the stream's consumers")
	}
}

// lossTap is a consumer that counts the recorder's Loss records it sees.
type lossTap struct{ n atomic.Int64 }

func (l *lossTap) Start(_ context.Context, fan *pipeline.Fanout) func() error {
	sub := fan.Subscribe("tap", 1024, pipeline.Lossless)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range sub.Events() {
			if ev.Loss != nil && ev.Loss.Consumer == event.ConsumerRecorder {
				l.n.Add(1)
			}
		}
	}()
	return func() error { <-done; return nil }
}
