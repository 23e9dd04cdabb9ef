package report

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/recorder"
)

// shortSynth is a 20 s session written in frames of 50 events.
func shortSynth(t *testing.T, dir string) (path string, events int) {
	s := defaultSynth(8)
	s.duration = 20 * time.Second
	evs := s.events()
	return writeRecording(t, dir, "short.zst", s.sessionHeader(), evs, 50), len(evs)
}

func TestTornTailIsAWarning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path, events := shortSynth(t, dir)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Cut the last frame short, as a SIGKILL mid-write would.
	if err := os.WriteFile(path, data[:len(data)-10], 0o600); err != nil {
		t.Fatal(err)
	}
	rec, err := Load(path)
	if err != nil {
		t.Fatalf("a torn tail is not an error: %v", err)
	}
	if len(rec.Warnings) != 1 {
		t.Fatalf("warnings %q, want one", rec.Warnings)
	}
	w := rec.Warnings[0]
	// The reader names the offset where the torn frame begins.
	var torn *recorder.TornTailError
	r, _ := recorder.Open(path)
	for {
		if _, err := r.Next(); err != nil {
			if !errors.As(err, &torn) {
				t.Fatalf("the reader says %v", err)
			}
			break
		}
	}
	r.Close()
	if !strings.Contains(w, "cut short at byte offset "+strconv.FormatInt(torn.Offset, 10)) {
		t.Errorf("warning %q does not name offset %d", w, torn.Offset)
	}
	// The complete frames hold all but the last frame's events (50 per frame,
	// the header in a frame of its own).
	lost := events % 50
	if lost == 0 {
		lost = 50
	}
	if got, want := rec.Events, int64(1+events-lost); got != want {
		t.Errorf("covered %d events, want %d", got, want)
	}
	for _, f := range Formats {
		var buf bytes.Buffer
		if err := Write(&buf, f, rec); err != nil {
			t.Fatal(err)
		}
		if f != CSV && !strings.Contains(buf.String(), "cut short at byte offset") {
			t.Errorf("%s report does not carry the warning", f)
		}
		// Every format says the recording is partial, CSV included.
		want := map[Format]string{Markdown: "partial recording", HTML: "partial recording", JSON: `"partial": true`, CSV: "recording,partial,value,1,bool"}[f]
		if !strings.Contains(buf.String(), want) {
			t.Errorf("%s report does not say the recording is partial (%q)", f, want)
		}
	}
}

func TestBadFilesAreClearErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good, _ := shortSynth(t, dir)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	corrupt := bytes.Clone(data)
	for i := len(corrupt) / 2; i < len(corrupt)/2+64; i++ {
		corrupt[i] ^= 0x5a
	}
	future := binary.LittleEndian.AppendUint32(nil, 0x184D2A50)
	payload := []byte(`{"magic":"latscope-recording","format":99,"schema":1}` + "\n")
	future = binary.LittleEndian.AppendUint32(future, uint32(len(payload)))
	future = append(future, payload...)

	for _, tc := range []struct {
		name, path string
		want       []string
	}{
		{"missing", filepath.Join(dir, "nope.zst"), []string{"no such file"}},
		{"empty", write("empty.zst", nil), []string{"not a latscope recording", "empty"}},
		{"text", write("notes.txt", []byte("hello, this is not a recording\n")), []string{"not a latscope recording"}},
		{"json lines", write("events.jsonl", []byte(`{"v":1,"kind":"session"}`+"\n")), []string{"not a latscope recording"}},
		{"corrupt", write("corrupt.zst", corrupt), []string{"corrupt recording at offset"}},
		{"future version", write("future.zst", future), []string{"unsupported recording version", "version 99", "reads version 1"}},
		{"header cut", write("cut.zst", data[:40]), []string{"cut short", "nothing to report"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.path)
			if err == nil {
				t.Fatal("no error")
			}
			t.Log(err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestRecordingWithoutRequests(t *testing.T) {
	t.Parallel()
	s := defaultSynth(10)
	path := writeRecording(t, t.TempDir(), "empty-session.zst", s.sessionHeader(), nil, 0)
	rec, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range Formats {
		var buf bytes.Buffer
		if err := Write(&buf, f, rec); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if page := renderHTML(t, rec); !strings.Contains(page, "No TTFT breakdown") || !strings.Contains(page, "No data for this chart") {
		t.Error("an empty session's charts do not say they are empty")
	}
	c := compare(t, rec, rec)
	for _, ch := range c.Changes {
		if ch.Tested() {
			t.Errorf("%s tested without windows", describe(ch))
		}
	}
}

func TestParseFormat(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"md", "JSON", "csv", "html"} {
		if _, err := ParseFormat(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	_, err := ParseFormat("xml")
	if err == nil || !strings.Contains(err.Error(), `unknown format "xml": want one of md, json, csv, html`) {
		t.Errorf("error %v", err)
	}
	if err := Write(&bytes.Buffer{}, "pdf", &Recording{}); err == nil || !strings.Contains(err.Error(), "want one of md, json, csv, html") {
		t.Errorf("Write with a bad format: %v", err)
	}
	for path, want := range map[string]Format{"a.md": Markdown, "b.JSON": JSON, "c.csv": CSV, "d.htm": HTML, "e.html": HTML} {
		if f, ok := FormatOf(path); !ok || f != want {
			t.Errorf("FormatOf(%s) = %s %v", path, f, ok)
		}
	}
	if _, ok := FormatOf("report.txt"); ok {
		t.Error("FormatOf(.txt) claims a format")
	}
}
