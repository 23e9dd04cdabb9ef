package main

import (
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/internal/testutil"
	"github.com/latscope/latscope/recorder"
)

// rewrite copies the recording at from to a new file, writing each event
// as edit returns it (several events: in that order; none: left out).
func rewrite(t *testing.T, from, to string, edit func(event.Event) []event.Event) string {
	t.Helper()
	r, err := recorder.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, err := recorder.Create(to, r.Header(), recorder.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, out := range edit(ev) {
			if err := w.Write(out); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return to
}

type countsJSON struct {
	Requests struct {
		Sent, OK int64
	} `json:"requests"`
	Duplicates int64 `json:"duplicates_ignored"`
}

// TestDuplicateRequestsAreCountedOnce: replay and report of a recording
// holding every request event twice give the original's counts and say how
// many events they ignored.
func TestDuplicateRequestsAreCountedOnce(t *testing.T) {
	dir := t.TempDir()
	orig := testutil.TinyRecording(t, dir, "once.lsr")
	twice := rewrite(t, orig, filepath.Join(dir, "twice.lsr"), func(ev event.Event) []event.Event {
		if ev.Request != nil {
			return []event.Event{ev, ev}
		}
		return []event.Event{ev}
	})
	const note = "30 duplicate request events ignored"
	counts := func(args ...string) (countsJSON, string) {
		t.Helper()
		stdout, stderr, err := execute(t, args...)
		if err != nil {
			t.Fatalf("latscope %s: %v", strings.Join(args, " "), err)
		}
		var c countsJSON
		if err := json.Unmarshal([]byte(stdout), &c); err != nil {
			t.Fatalf("latscope %s: %v", strings.Join(args, " "), err)
		}
		return c, stderr
	}
	for _, cmd := range [][]string{{"replay", "--no-tui", "--json"}, {"report", "--format", "json"}} {
		want, stderr := counts(append(cmd, orig)...)
		if want.Requests.Sent != 30 || want.Duplicates != 0 || stderr != "" {
			t.Fatalf("latscope %s of the original: %+v, stderr %q", cmd[0], want, stderr)
		}
		got, stderr := counts(append(cmd, twice)...)
		if got.Requests != want.Requests || got.Duplicates != 30 {
			t.Errorf("latscope %s of the doubled recording: %+v, want %+v and 30 duplicates", cmd[0], got, want)
		}
		if !strings.Contains(stderr, "latscope: warning: ") || !strings.Contains(stderr, note) {
			t.Errorf("latscope %s: stderr %q does not say %q", cmd[0], stderr, note)
		}
	}
	stdout, _, err := execute(t, "replay", "--no-tui", twice)
	if err != nil || !strings.Contains(stdout, note) {
		t.Errorf("replay's table does not say %q (%v):\n%s", note, err, stdout)
	}
}

// TestSecondSessionIsRefused: replay and report refuse a recording with a
// second session header, saying where it is, and print no summary.
func TestSecondSessionIsRefused(t *testing.T) {
	dir := t.TempDir()
	orig := testutil.TinyRecording(t, dir, "one.lsr")
	n := 0
	two := rewrite(t, orig, filepath.Join(dir, "two.lsr"), func(ev event.Event) []event.Event {
		if n++; n == 10 { // in the frame of the requests, after 9 of them
			other := *ev.Request
			return []event.Event{event.NewSession(&event.Session{Latscope: "test", Name: "another", Target: "http://127.0.0.1:9000"}), event.NewRequest(&other)}
		}
		return []event.Event{ev}
	})
	for _, args := range [][]string{{"replay", two, "--no-tui"}, {"report", two}} {
		stdout, _, err := execute(t, args...)
		if err == nil || !strings.Contains(err.Error(), "a second session header at line 9 of the frame") {
			t.Errorf("latscope %s: err = %v, want the second session header refused", args[0], err)
		}
		if stdout != "" {
			t.Errorf("latscope %s printed a summary of two sessions as one:\n%s", args[0], stdout)
		}
	}
}
