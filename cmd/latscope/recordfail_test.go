package main

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/latscope/latscope/aggregate"
)

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

// A run recording to a filesystem that fills up (a 64 KiB tmpfs) says so
// on stderr while it runs, counts the events not recorded in its JSON
// summary, the same number its error gives, fails, and leaves no file.
// Mounting needs root.
func TestRunRecordingToAFullFilesystem(t *testing.T) {
	t.Parallel()
	dir := mountTinyTmpfs(t, 4<<10)
	url := serveTinySim(t)
	file := filepath.Join(dir, "run.lsr")
	stdout, stderr, err := execute(t, "run", "--url", url, "--no-tui", "--json", "--duration", "3s", "-c", "4",
		"--prompt-tokens", "64", "--output-tokens", "16", "--no-metrics", "--no-gpu", "--record", file)
	m := regexp.MustCompile(`(\d+) events not recorded`).FindStringSubmatch(errText(err))
	if m == nil {
		t.Fatalf("run = %v, want it to fail with the count of events not recorded\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "recording to "+file+" failed: no space left on device;") {
		t.Errorf("stderr does not say the recording failed while it ran:\n%s", stderr)
	}
	var got struct{ Unrecorded *aggregate.Unrecorded }
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
	}
	if got.Unrecorded == nil || strconv.FormatInt(got.Unrecorded.Events, 10) != m[1] {
		t.Errorf("JSON unrecorded %+v, the error says %s", got.Unrecorded, m[1])
	}
	// A recording that lacks a stretch of the run is not kept, and no
	// part of it is left behind.
	if !strings.Contains(errText(err), "no recording is kept at "+file) {
		t.Errorf("run's error does not say the recording was not kept: %v", err)
	}
	for _, p := range []string{file, file + ".partial"} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after a failed recording: %v, want it absent", filepath.Base(p), err)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// mountTinyTmpfs mounts a 64 KiB tmpfs that a filler file leaves free
// bytes of, or skips the test: mounting needs root.
func mountTinyTmpfs(t *testing.T, free int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	if err := os.WriteFile(filepath.Join(dir, "filler"), make([]byte, 64<<10-free), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// An agent whose --record fills its disk says so on its stderr, counts the
// events not recorded on /metrics, and announces them on its feed, so an
// attached dashboard's summary counts them too.
func TestAgentSaysItsRecordingFailed(t *testing.T) {
	t.Parallel()
	dir := mountTinyTmpfs(t, 4<<10)
	file := filepath.Join(dir, "agent.lsr")
	url := serveTinySim(t)
	a := startAgent(t, "--url", url, "--duration", "3s", "-c", "4", "--prompt-tokens", "32", "--output-tokens", "8",
		"--no-metrics", "--no-gpu", "--linger", "30s", "--quiet", "--record", file)
	out, stderr, err := execute(t, "attach", "http://"+a.addr, "--no-tui", "--json")
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, stderr)
	}
	var got struct {
		Agents map[string]struct{ Unrecorded *aggregate.Unrecorded }
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Agents) != 1 {
		t.Fatalf("attach JSON: %v\n%s", err, out)
	}
	var agentSummary struct{ Unrecorded *aggregate.Unrecorded }
	for _, s := range got.Agents {
		agentSummary = s
	}
	if u := agentSummary.Unrecorded; u == nil || u.Events == 0 || !strings.Contains(u.Reason, "no space left on device") {
		t.Errorf("the attached summary's unrecorded = %+v, want the agent's loss", u)
	}
	metrics := get(t, "http://"+a.addr+"/metrics", "")
	if !regexp.MustCompile(`latscope_events_lost_total\{consumer="recorder"\} [1-9]`).MatchString(metrics) {
		t.Errorf("/metrics does not count the events not recorded:\n%s", metrics)
	}
	a.wait()
	if a.err == nil || !strings.Contains(a.err.Error(), "events not recorded") {
		t.Errorf("agent: %v, want it to fail with the count", a.err)
	}
	if !strings.Contains(a.stderr.String(), "recording to "+file+" failed: no space left on device;") {
		t.Errorf("the agent's stderr does not say it:\n%s", a.stderr.String())
	}
}

// A report written onto a filesystem filled to the brim fails with exit 1
// in every format and leaves no file, whole or partial, behind.
func TestReportToAFullFilesystem(t *testing.T) {
	t.Parallel()
	rec := filepath.Join(t.TempDir(), "rec.lsr")
	hostileRecording(t, rec)
	dir := mountTinyTmpfs(t, 0)
	for _, format := range []string{"md", "csv", "html", "json"} {
		out := filepath.Join(dir, "x."+format)
		_, _, err := execute(t, "report", rec, "--format", format, "-o", out)
		if code := exitCode(io.Discard, err, nil); code != exitFailure || !strings.Contains(errText(err), "no space left on device") {
			t.Errorf("report --format %s onto a full disk: exit %d (%v), want 1 naming the full disk", format, code, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "filler" {
			t.Errorf("%s left on the full disk", e.Name())
		}
	}
}

// --record onto a filesystem filled to the brim fails with exit 1 and
// leaves no file behind.
func TestRecordToAFullFilesystem(t *testing.T) {
	t.Parallel()
	dir := mountTinyTmpfs(t, 0)
	url := serveTinySim(t)
	file := filepath.Join(dir, "run.lsr")
	_, _, err := execute(t, "run", "--url", url, "--no-tui", "-n", "2", "--prompt-tokens", "16", "--output-tokens", "4",
		"--no-metrics", "--no-gpu", "--record", file)
	if code := exitCode(io.Discard, err, nil); code != exitFailure || !strings.Contains(errText(err), "no space left on device") {
		t.Errorf("run --record onto a full disk: exit %d (%v), want 1 naming the full disk", code, err)
	}
	for _, p := range []string{file, file + ".partial"} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s on the full disk: %v, want it absent", filepath.Base(p), err)
		}
	}
}
