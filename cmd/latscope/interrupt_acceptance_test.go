//go:build acceptance

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latscope/latscope/internal/shutdown"
	"github.com/latscope/latscope/internal/testutil"
)

// TestHeadlessDemoSignals sends each interrupting signal for real to a
// headless demo (this test binary as latscope, see TestMain) once its
// status line shows requests in flight, twice at once as timeout(1) does:
// each exits 130 with the summary, the requests it cut short cancelled,
// none an error (issue 24). Real processes and signals: the acceptance
// tier.
func TestHeadlessDemoSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(shutdown.SignalName(sig), func(t *testing.T) {
			errBuf := newWatchedBuffer(`in flight [1-9]`)
			var out testutil.SyncBuffer
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			args := []string{"demo", "--no-tui", "--json", "--profile", "tiny", "-c", "3", "-d", "10m", "--no-gpu",
				"--prompt-tokens", "16", "--output-tokens", "30000"}
			cmd.Env = append(os.Environ(), "LATSCOPE_TEST_MAIN="+strings.Join(args, "\x1f"))
			cmd.Stdout, cmd.Stderr = &out, errBuf
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-exited
			})
			select {
			case <-errBuf.seen:
			case err := <-exited:
				t.Fatalf("latscope exited (%v) before any request was in flight\nstderr:\n%s", err, errBuf.String())
			case <-time.After(2 * time.Minute):
				t.Fatalf("no request in flight within 2 minutes\nstderr:\n%s", errBuf.String())
			}
			_ = cmd.Process.Signal(sig)
			_ = cmd.Process.Signal(sig) // as timeout(1) does: to the process, then its group
			select {
			case <-exited:
			case <-time.After(2 * time.Minute):
				t.Fatalf("latscope did not exit within 2 minutes of %s\nstderr:\n%s", shutdown.SignalName(sig), errBuf.String())
			}
			exited <- nil // for the cleanup
			if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
				t.Errorf("exit %d, want %d\nstderr:\n%s", code, exitInterrupted, errBuf.String())
			}
			var got struct {
				Requests struct {
					Sent, OK, Errors int
					CancelledAtEnd   int `json:"cancelled_at_end"`
				} `json:"requests"`
			}
			if err := json.Unmarshal([]byte(out.String()), &got); err != nil {
				t.Fatalf("stdout is not one JSON object: %v\n%s\nstderr:\n%s", err, out.String(), errBuf.String())
			}
			if r := got.Requests; r.Sent != 3 || r.Errors != 0 || r.CancelledAtEnd != 3 {
				t.Errorf("requests %+v: want 3 sent, all cancelled, none an error", r)
			}
		})
	}
}
