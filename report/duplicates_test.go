package report

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/recorder"
)

// TestDuplicateRequestsCountedOnce: a recording whose every request event
// is written twice (once at once, once again a frame later) reports what
// the recording with each once reports, and says how many it ignored.
func TestDuplicateRequestsCountedOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := defaultSynth(11)
	s.duration = 20 * time.Second
	evs := s.events()
	var doubled []event.Event
	requests := int64(0)
	for i, ev := range evs {
		doubled = append(doubled, ev)
		if ev.Request != nil {
			doubled = append(doubled, ev)
			requests++
		}
		if i >= 50 && evs[i-50].Request != nil {
			doubled = append(doubled, evs[i-50]) // a stretch sent again
		}
	}
	once, err := Load(writeRecording(t, dir, "once.lsr", s.sessionHeader(), evs, 50))
	if err != nil {
		t.Fatal(err)
	}
	twice, err := Load(writeRecording(t, dir, "twice.lsr", s.sessionHeader(), doubled, 50))
	if err != nil {
		t.Fatal(err)
	}
	dropped := int64(len(doubled) - len(evs))
	if got, want := twice.Summary.Requests, once.Summary.Requests; !reflect.DeepEqual(got, want) || got.Sent != requests {
		t.Errorf("requests of the doubled recording %+v, want %+v (%d sent)", got, want, requests)
	}
	if !reflect.DeepEqual(twice.Summary.TTFT, once.Summary.TTFT) {
		t.Errorf("TTFT %+v, want %+v", twice.Summary.TTFT, once.Summary.TTFT)
	}
	if twice.Summary.DuplicatesIgnored != dropped || once.Summary.DuplicatesIgnored != 0 {
		t.Errorf("duplicates ignored %d and %d, want %d and 0", twice.Summary.DuplicatesIgnored, once.Summary.DuplicatesIgnored, dropped)
	}
	if want := aggregate.DuplicatesNote(dropped); len(twice.Warnings) != 1 || twice.Warnings[0] != want || len(once.Warnings) != 0 {
		t.Errorf("warnings %q (and %q), want [%q]", twice.Warnings, once.Warnings, want)
	}
}

// TestSecondSessionHeaderRefused: a recording with two session headers in
// one frame is refused, naming the frame and line, not reported as one run.
func TestSecondSessionHeaderRefused(t *testing.T) {
	t.Parallel()
	s := defaultSynth(12)
	s.duration = 5 * time.Second
	evs := s.events()
	other := s.sessionHeader()
	other.RunID = "another"
	evs = append(evs[:10:10], append([]event.Event{event.NewSession(other)}, evs[10:]...)...)
	path := writeRecording(t, t.TempDir(), "two.lsr", s.sessionHeader(), evs, 0) // one frame
	_, err := Load(path)
	var se *recorder.SessionError
	if !errors.As(err, &se) || se.Line != 11 || !strings.Contains(err.Error(), "a second session header at line 11") {
		t.Fatalf("Load = %v, want the second session header refused at line 11 of its frame", err)
	}
}
