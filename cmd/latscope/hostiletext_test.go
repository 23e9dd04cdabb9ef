package main

// Text from a hostile server or recording reaches no output raw: not the
// headless summary, not stderr, not a report in any format.

import (
	"context"
	"encoding/csv"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/internal/textsafe"
	"github.com/latscope/latscope/internal/textsafe/hostile"
	"github.com/latscope/latscope/recorder"
)

// hostileServer answers every request with a 500 whose body is every
// hostile string at once.
func hostileServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(hostile.Joined()))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// hostileRecording writes a recording whose text fields (session name,
// model, errors) hold the hostile strings raw, as a tampered file would.
func hostileRecording(t *testing.T, path string) {
	t.Helper()
	bad := hostile.Joined()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w, err := recorder.Create(path, &event.Session{Time: start, Latscope: "test", Name: bad, Region: bad,
		Target: "http://127.0.0.1:8000", Model: bad, Server: bad, Load: event.Load{Mode: "closed", Concurrency: 1}}, recorder.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		at := start.Add(time.Duration(i) * time.Second)
		r := &event.Request{ID: "r" + string(rune('a'+i)), Dialect: "openai-chat", Model: bad, Intended: at, Start: at,
			Outcome: event.OutcomeHTTPStatus, Status: 500, Error: bad, E2E: 10 * time.Millisecond}
		if err := w.Write(event.NewRequest(r)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Write(event.NewMarker(&event.Marker{Time: start, Kind: event.MarkerNote, Source: bad, Message: bad})); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// assertShownSafe fails if out holds a character a terminal acts on.
func assertShownSafe(t *testing.T, what, out string) {
	t.Helper()
	if i := textsafe.IndexUnsafe(out); i >= 0 {
		t.Errorf("%s: raw %q at byte %d:\n%s", what, out[i:min(i+12, len(out))], i, out)
	}
	if leaks := hostile.Leaks(out, hostile.Terminal); len(leaks) > 0 {
		t.Errorf("%s: %v reach the output raw", what, leaks)
	}
}

func TestHostileTextIsShownEscaped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	live := filepath.Join(dir, "live.lsr")
	tampered := filepath.Join(dir, "tampered.lsr")
	hostileRecording(t, tampered)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	stdout, stderr, err := executeCtx(t, ctx, "run", "--url", hostileServer(t), "--dialect", "openai-chat", "--model", "m",
		"--no-tui", "--no-gpu", "-n", "4", "-c", "2", "--prompt-tokens", "8", "--output-tokens", "4", "--record", live)
	assertShownSafe(t, "run", stdout+stderr)
	assertExit(t, "run", err, exitAllFailed)
	if !strings.Contains(stdout+stderr, hostile.Word) {
		t.Errorf("run: the server's error text is not shown at all:\n%s%s", stdout, stderr)
	}
	for _, rec := range []string{live, tampered} {
		for _, args := range [][]string{{"replay", rec, "--no-tui"}, {"replay", rec, "--no-tui", "--json"}} {
			stdout, stderr, err := executeCtx(t, ctx, args...)
			assertShownSafe(t, strings.Join(args, " "), stdout+stderr)
			// Every request failed: the same exit code as the run's.
			assertExit(t, strings.Join(args, " "), err, exitAllFailed)
		}
		for _, f := range []string{"md", "csv", "html", "json"} {
			out := filepath.Join(dir, filepath.Base(rec)+"."+f)
			_, _, err := executeCtx(t, ctx, "report", rec, "-o", out)
			assertExit(t, "report -o "+out, err, exitAllFailed)
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			assertShownSafe(t, "report "+f, string(b))
			if f == "csv" {
				assertNoFormulas(t, string(b))
			}
		}
	}
}

// assertNoFormulas fails if a cell of the CSV would run as a formula.
func assertNoFormulas(t *testing.T, data string) {
	t.Helper()
	rows, err := csv.NewReader(strings.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		for _, cell := range row {
			if textsafe.CSVCell(cell) != cell {
				t.Errorf("csv cell %q could run as a formula", cell)
			}
		}
	}
}

// assertExit fails unless err maps to exit code want.
func assertExit(t *testing.T, what string, err error, want int) {
	t.Helper()
	if got := exitCode(io.Discard, err, nil); got != want {
		t.Errorf("%s: exit %d (%v), want %d", what, got, err, want)
	}
}

// A --record path that cannot be written fails before the server hears of
// the run: no request, no set-up probe.
func TestRecordPathCheckedBeforeTheServer(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	link := filepath.Join(dir, "link.lsr")
	if err := os.Symlink(filepath.Join(dir, "elsewhere"), link); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--record", filepath.Join(dir, "missing", "rec.lsr")},
		{"--record", link, "--record-overwrite"},
	} {
		_, stderr, err := execute(t, append([]string{"run", "--url", srv.URL, "--no-tui", "--no-gpu", "-n", "1"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "--record") {
			t.Errorf("%v: err %v, want --record refused\n%s", args, err, stderr)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server got %d requests before --record was refused", n)
	}
}

// A hostile agent, whose session header, requests' errors and markers carry
// every hostile string, and one that refuses with a hostile body: attach's
// stdout and stderr, text and --json, hold none of it raw.
func TestHostileAgentIsShownEscaped(t *testing.T) {
	t.Parallel()
	streaming := hostileAgent(t)
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(hostile.Joined()))
	}))
	t.Cleanup(refusing.Close)
	for _, args := range [][]string{
		{"attach", streaming, "--no-tui"},
		{"attach", streaming, "--no-tui", "--json"},
		{"attach", streaming, refusing.URL, "--no-tui", "--give-up", "300ms"},
		{"attach", streaming, refusing.URL, "--no-tui", "--json", "--give-up", "300ms"},
	} {
		stdout, stderr, err := execute(t, args...)
		what := strings.Join(args[2:], " ")
		assertShownSafe(t, what, stdout+stderr+errText(err))
		if !strings.Contains(stdout+stderr, hostile.Word) {
			t.Errorf("%s: the agent's text is not shown at all:\n%s%s", what, stdout, stderr)
		}
		assertExit(t, what, err, exitAllFailed)
	}
}

// hostileAgent serves an agent's stream whose session header, requests'
// errors and marker carry every hostile string; it returns its URL.
func hostileAgent(t *testing.T) string {
	t.Helper()
	bad := hostile.Joined()
	at := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	evs := []event.Event{event.NewSession(&event.Session{Time: at, Name: bad, Region: bad, Host: bad, Model: bad, Server: bad,
		Target: "http://x", Load: event.Load{Mode: bad}})}
	for i := range 4 {
		start := at.Add(time.Duration(i) * time.Second)
		evs = append(evs, event.NewRequest(&event.Request{ID: "r" + string(rune('a'+i)), Start: start, Intended: start, Model: bad,
			Dialect: bad, Outcome: event.OutcomeHTTPStatus, Status: 500, Error: bad, E2E: 10 * time.Millisecond}))
	}
	evs = append(evs, event.NewMarker(&event.Marker{Time: at, Kind: event.MarkerNote, Source: bad, Message: bad}))
	return serveAgentStream(t, "run-1", evs).URL
}
