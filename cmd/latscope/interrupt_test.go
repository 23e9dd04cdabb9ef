package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latscope/latscope/internal/shutdown"
	"github.com/latscope/latscope/internal/testutil"
)

// watchedBuffer is a testutil.SyncBuffer that tells, once, when what was written to
// it first matches a pattern: a test waits for what latscope says (a status
// line), not for a while.
type watchedBuffer struct {
	testutil.SyncBuffer
	want *regexp.Regexp
	once sync.Once
	seen chan struct{}
}

func newWatchedBuffer(want string) *watchedBuffer {
	return &watchedBuffer{want: regexp.MustCompile(want), seen: make(chan struct{})}
}

func (w *watchedBuffer) Write(p []byte) (int, error) {
	n, err := w.SyncBuffer.Write(p)
	if w.want.MatchString(w.String()) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

// interruptDemo runs a headless demo whose requests cannot finish (30,000
// output tokens each) and cancels its context, as the first SIGINT, SIGTERM
// or SIGHUP does (shutdown), once its status line shows requests in flight.
func interruptDemo(t *testing.T, extra ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	var out testutil.SyncBuffer
	errBuf := newWatchedBuffer(`in flight [1-9]`)
	root := newRootCmd()
	root.SetArgs(append([]string{"demo", "--no-tui", "--profile", "tiny", "-c", "3", "-d", "10m", "--no-gpu",
		"--prompt-tokens", "16", "--output-tokens", "30000"}, extra...))
	root.SetOut(&out)
	root.SetErr(errBuf)
	go func() {
		select {
		case <-errBuf.seen:
			cancel(shutdown.InterruptedBy{Sig: os.Interrupt}) // the cause the signal watcher gives
		case <-ctx.Done():
		}
	}()
	err = returnsWithin(t, 2*time.Minute, "the interrupted demo", func() error { return root.ExecuteContext(ctx) })
	return out.String(), errBuf.String(), err
}

// TestInterruptedDemoCancelsAreNotErrors: Ctrl-C (SIGTERM, SIGHUP) in the
// middle of a headless demo (issue 24): the requests it cut short are
// cancelled, not errors, in the summary and in its JSON, and the exit is
// 130, not 3, though none succeeded.
func TestInterruptedDemoCancelsAreNotErrors(t *testing.T) {
	t.Parallel()
	t.Run("text", func(t *testing.T) {
		t.Parallel()
		stdout, stderr, err := interruptDemo(t)
		assertInterrupted(t, err, stderr)
		if !regexp.MustCompile(`(?m)^Requests: 3 sent, 0 ok, 0 errors, 3 cancelled at the end of the run;`).MatchString(stdout) {
			t.Errorf("summary: want 3 sent, 0 errors, 3 cancelled:\n%s", stdout)
		}
		if strings.Contains(stdout, "Errors by kind") || strings.Contains(stdout, "error burst") {
			t.Errorf("the summary lists errors for a run without any:\n%s", stdout)
		}
		if strings.Contains(stdout, "Duration: 0.00 s") {
			t.Errorf("the run lasted no time:\n%s", stdout)
		}
	})
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		stdout, stderr, err := interruptDemo(t, "--json")
		assertInterrupted(t, err, stderr)
		var got struct {
			Requests struct {
				Sent, OK, Errors int
				CancelledAtEnd   int              `json:"cancelled_at_end"`
				ByOutcome        map[string]int64 `json:"by_outcome"`
				Duration         float64          `json:"duration_s"`
			} `json:"requests"`
		}
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
		}
		if r := got.Requests; r.Sent != 3 || r.OK != 0 || r.Errors != 0 || r.CancelledAtEnd != 3 || len(r.ByOutcome) != 0 || r.Duration <= 0 {
			t.Errorf("requests %+v: want 3 sent, all cancelled, no error, a duration", r)
		}
	})
}

func assertInterrupted(t *testing.T, err error, stderr string) {
	t.Helper()
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitInterrupted {
		t.Fatalf("err = %v, want exit %d\nstderr:\n%s", err, exitInterrupted, stderr)
	}
}
