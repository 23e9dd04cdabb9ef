package main

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets a test run latscope's real main in a child process (to kill
// it with SIGKILL): the child is this test binary with LATSCOPE_TEST_MAIN set.
func TestMain(m *testing.M) {
	if args := os.Getenv("LATSCOPE_TEST_MAIN"); args != "" {
		os.Args = append([]string{"latscope"}, strings.Split(args, "\x1f")...)
		main()
		os.Exit(0)
	}
	quietOpenTelemetry() // as main does: a test's closed collector is counted, not logged
	os.Exit(m.Run())
}

func TestReplayPrintsTheSummaryTheRunPrinted(t *testing.T) {
	t.Parallel()
	url := serveTinySim(t)
	file := filepath.Join(t.TempDir(), "run.lsr")
	live, stderr, err := execute(t, "run", "--url", url, "--no-tui", "-n", "30", "-c", "4", "--prompt-tokens", "64",
		"--output-tokens", "16", "--scrape-interval", "100ms", "--no-gpu", "--record", file)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("recording: %v, mode %v; want a 0600 file", err, fi.Mode())
	}
	replayed, stderr, err := execute(t, "replay", file, "--no-tui")
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, stderr)
	}
	if replayed != live {
		t.Errorf("replay printed another summary.\nlive:\n%s\nreplay:\n%s", live, replayed)
	}
	if _, _, err := execute(t, "run", "--url", url, "--no-tui", "-n", "1", "--no-gpu", "--record", file); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("a second --record to the same file: %v, want a refusal (use --record-overwrite)", err)
	}
}

func TestReplayBadInput(t *testing.T) {
	dir := t.TempDir()
	notRec := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notRec, []byte("hello, not a recording\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", filepath.Join(dir, "missing.lsr"), "--no-tui"}, "no such file"},
		{[]string{"replay", notRec, "--no-tui"}, "not a latscope recording"},
		{[]string{"replay", notRec, "--speed", "fast"}, `--speed "fast"`},
		{[]string{"replay"}, "accepts 1 arg"},
	} {
		_, _, err := execute(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("latscope %s: err = %v, want it to mention %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// TestKilledRecordingReplays records a demo in a child process, kills it
// with SIGKILL mid-run, and replays what it left.
func TestKilledRecordingReplays(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "killed.lsr")
	partial := file + ".partial" // a killed run's recording keeps its partial name
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LATSCOPE_TEST_MAIN="+strings.Join([]string{
		"demo", "--profile", "tiny", "--duration", "60s", "--concurrency", "4", "--no-gpu", "--record", file}, "\x1f"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// Wait until a few frames are on disk (the recorder flushes every
	// second), then kill the process where it stands.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if fi, err := os.Stat(partial); err == nil && fi.Size() > 8<<10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the recording did not grow within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var exitErr *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exitErr) {
		t.Fatalf("child ended with %v, want killed", err)
	}
	if _, err := os.Stat(file); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a killed run put its recording in place: %v", err)
	}
	file = partial
	out, stderr, err := execute(t, "replay", file, "--no-tui")
	if err != nil {
		t.Fatalf("replay of a killed recording: %v\n%s", err, stderr)
	}
	if !strings.Contains(out, "Requests:") || strings.Contains(out, "Requests: 0 sent") {
		t.Errorf("replay of a killed recording has no requests:\n%s", out)
	}
	for _, format := range []string{"md", "html"} {
		rep, stderr, err := execute(t, "report", file, "--format", format)
		if err != nil || len(rep) < 500 {
			t.Errorf("report --format %s of a killed recording: %v (%d bytes)\n%s", format, err, len(rep), stderr)
		}
	}
}
