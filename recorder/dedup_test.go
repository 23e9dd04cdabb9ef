package recorder

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/latscope/latscope/event"
)

// requests returns n request events of the recording's run, one a
// millisecond from t0.
func requests(n int) []event.Event {
	evs := make([]event.Event, n)
	for i := range evs {
		at := t0.Add(time.Duration(i) * time.Millisecond)
		evs[i] = event.NewRequest(&event.Request{ID: fmt.Sprintf("ls-ab12-%d", i), Seq: uint64(i), Dialect: "openai-chat",
			Intended: at, Start: at, TTFT: 80 * time.Millisecond, E2E: 90 * time.Millisecond, Outcome: event.OutcomeOK})
	}
	return evs
}

// rawFrame is a data frame of evs' lines as the writer frames them, for
// files the writer would not write.
func rawFrame(t testing.TB, evs ...event.Event) []byte {
	t.Helper()
	var lines []byte
	for _, ev := range evs {
		b, err := event.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(append(lines, b...), '\n')
	}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(lines, nil)
}

// TestDuplicateRequestsDropped: a recording that holds every request event
// twice (each line doubled, and the whole stretch of frames again) reads as
// the recording that holds each once, and says how many it dropped.
func TestDuplicateRequestsDropped(t *testing.T) {
	t.Parallel()
	evs := append(requests(40), everyKind(t0.Add(time.Second))...)
	rec := buildRecording(t, evs[:20], evs[20:])
	var doubled []event.Event // each line twice, in one frame
	wantDropped := int64(0)   // every request in it: the frames before hold each
	for _, ev := range evs {
		doubled = append(doubled, ev, ev)
		if ev.Request != nil {
			wantDropped += 2
		}
	}
	data := append(bytes.Clone(rec.data), rawFrame(t, doubled...)...)

	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []event.Event
	for {
		ev, err := r.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
		got = append(got, ev)
	}
	// The samples, markers and spans are not requests: they stay, twice.
	var want []event.Event
	want = append(want, rec.all()...)
	for _, ev := range doubled {
		if ev.Request == nil {
			want = append(want, ev)
		}
	}
	sameEvents(t, got, want)
	if r.Duplicates() != wantDropped {
		t.Errorf("Duplicates = %d, want %d", r.Duplicates(), wantDropped)
	}
}

// TestReplayDropsDuplicates: a Replay emits each request once and counts
// the copies it left out, those after the last event emitted too.
func TestReplayDropsDuplicates(t *testing.T) {
	t.Parallel()
	evs := requests(10)
	rec := buildRecording(t, evs)
	path := filepath.Join(t.TempDir(), "dup.lsr")
	if err := os.WriteFile(path, append(bytes.Clone(rec.data), rawFrame(t, evs...)...), 0o600); err != nil {
		t.Fatal(err)
	}
	rp := NewReplay(path, ReplayOptions{Speed: MaxSpeed})
	var n int
	if err := rp.Run(context.Background(), func(ev event.Event) {
		if ev.Request != nil {
			n++
		}
	}); err != nil {
		t.Fatal(err)
	}
	if n != len(evs) || rp.Duplicates() != int64(len(evs)) {
		t.Errorf("emitted %d requests, %d duplicates; want %d and %d", n, rp.Duplicates(), len(evs), len(evs))
	}
}

// TestSecondSessionHeaderRefused: two session headers in one frame are
// not summed as one session: reading stops at the second, after every
// event before it, and the error names its frame and line.
func TestSecondSessionHeaderRefused(t *testing.T) {
	t.Parallel()
	evs := requests(4)
	rec := buildRecording(t, evs[:2])
	other := *testHeader()
	other.RunID, other.Time = "cd34", t0.Add(time.Minute)
	for _, second := range []event.Event{event.NewSession(&other), event.NewSession(testHeader())} {
		data := append(bytes.Clone(rec.data), rawFrame(t, evs[2], second, evs[3])...)
		got, err := readAll(data)
		var se *SessionError
		if !errors.As(err, &se) || se.Offset != int64(len(rec.data)) || se.Line != 2 {
			t.Fatalf("read = %v, want a *SessionError at line 2 of the frame at %d", err, len(rec.data))
		}
		sameEvents(t, got, append(rec.all(), evs[2]))
	}
}

// TestRecentIDsWindow: the window recognises an id among the latest
// RecentRequestIDs and forgets the oldest beyond them.
func TestRecentIDsWindow(t *testing.T) {
	t.Parallel()
	var s recentIDs
	for i := range RecentRequestIDs {
		if !s.add(fmt.Sprint(i)) {
			t.Fatalf("id %d taken as seen", i)
		}
	}
	if s.add("0") || s.add(fmt.Sprint(RecentRequestIDs-1)) {
		t.Fatal("an id in the window was not recognised")
	}
	if !s.add("new") || !s.add("0") {
		t.Fatal("the oldest id was not forgotten when the window moved on")
	}
	if len(s.seen) != RecentRequestIDs || len(s.ring) != RecentRequestIDs {
		t.Errorf("window holds %d ids (%d in the ring), want %d", len(s.seen), len(s.ring), RecentRequestIDs)
	}
}
