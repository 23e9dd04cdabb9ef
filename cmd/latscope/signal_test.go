package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/latscope/latscope/internal/testutil"
)

// Bounds of the pseudo-terminal tests. They are generous on purpose: the
// tests wait for events (the alternate screen, the exit), and these only
// fail a host too busy to be measured. Measured typically: the dashboard
// opens in under 1 s and the process exits 0.05-0.3 s after the signal.
const (
	ptyOpenWait = 60 * time.Second
	ptyExitWait = 30 * time.Second
)

const (
	enterAltScreen = "\x1b[?1049h"
	leaveAltScreen = "\x1b[?1049l"
	showCursor     = "\x1b[?25h"
)

// openPTY opens a pseudo-terminal pair with nothing but the kernel's
// interface: /dev/ptmx, unlocked, and the pts device it names.
func openPTY(t *testing.T) (ptmx, pts *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	fd := int(ptmx.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		ptmx.Close()
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		ptmx.Close()
		t.Fatalf("ptsname: %v", err)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		ptmx.Close()
		t.Fatalf("open pts: %v", err)
	}
	if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 120}); err != nil {
		t.Fatalf("window size: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	return ptmx, pts
}

// ptyRun is latscope (this test binary, see TestMain) on a pseudo-terminal.
type ptyRun struct {
	t      *testing.T
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer // what latscope wrote on the terminal
	stderr testutil.SyncBuffer
	grew   chan struct{} // signalled when out grows
	read   chan struct{} // closed when the terminal's output ends
	exited chan struct{}
	err    error // Wait's, once exited is closed
}

// startOnPTY starts latscope with args on a new pseudo-terminal, as the
// session leader with the terminal as its controlling one, as a shell
// would.
func startOnPTY(t *testing.T, args ...string) *ptyRun {
	t.Helper()
	ptmx, pts := openPTY(t)
	r := &ptyRun{t: t, grew: make(chan struct{}, 1), read: make(chan struct{}), exited: make(chan struct{})}
	r.cmd = exec.Command(os.Args[0], "-test.run=^$")
	r.cmd.Env = append(os.Environ(), "LATSCOPE_TEST_MAIN="+strings.Join(args, "\x1f"), "TERM=xterm-256color", "NO_COLOR=")
	r.cmd.Stdin, r.cmd.Stdout, r.cmd.Stderr = pts, pts, &r.stderr
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close() // the child holds it now: reads of ptmx end when it exits
	go r.copyOut(ptmx)
	go func() {
		r.err = r.cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		<-r.exited
	})
	return r
}

// read copies the terminal's output and answers the queries a terminal
// answers (the background colour, the cursor position), so that nothing
// waits for a terminal emulator that is not there.
func (r *ptyRun) copyOut(ptmx *os.File) {
	defer close(r.read)
	buf := make([]byte, 32<<10)
	for {
		n, err := ptmx.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			if bytes.Contains(chunk, []byte("\x1b]11;?")) {
				_, _ = ptmx.Write([]byte("\x1b]11;rgb:0000/0000/0000\x1b\\"))
			}
			if bytes.Contains(chunk, []byte("\x1b[6n")) {
				_, _ = ptmx.Write([]byte("\x1b[1;1R"))
			}
			r.mu.Lock()
			r.out.Write(chunk)
			r.mu.Unlock()
			select {
			case r.grew <- struct{}{}:
			default:
			}
		}
		if err != nil {
			return
		}
	}
}

func (r *ptyRun) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// waitFor waits until the terminal shows want.
func (r *ptyRun) waitFor(want string, within time.Duration) {
	r.t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for !strings.Contains(r.output(), want) {
		select {
		case <-r.grew:
		case <-r.exited:
			if !strings.Contains(r.output(), want) {
				r.t.Fatalf("latscope exited (%v) before showing %q\nstderr:\n%s", r.err, want, r.stderr.String())
			}
		case <-deadline.C:
			r.t.Fatalf("latscope did not show %q within %s\nstderr:\n%s", want, within, r.stderr.String())
		}
	}
}

// waitExit waits for the process to end and returns its exit code and how
// long it took.
func (r *ptyRun) waitExit(within time.Duration) (int, time.Duration) {
	r.t.Helper()
	start := time.Now()
	select {
	case <-r.exited:
	case <-time.After(within):
		_ = r.cmd.Process.Signal(syscall.SIGQUIT) // a goroutine dump on stderr
		<-r.exited
		r.t.Fatalf("latscope did not exit within %s of the signal\nstderr:\n%s", within, r.stderr.String())
	}
	took := time.Since(start)
	select { // the last of the output (the summary) may still be in the pty
	case <-r.read:
	case <-time.After(within):
		r.t.Fatalf("the terminal's output did not end within %s of the exit", within)
	}
	var ee *exec.ExitError
	if r.err != nil && !errors.As(r.err, &ee) {
		r.t.Fatalf("wait: %v", r.err)
	}
	return r.cmd.ProcessState.ExitCode(), took
}

// assertRestored checks what every interrupted dashboard must leave: exit
// 130, the terminal out of the alternate screen with its cursor shown
// after the dashboard last entered it, and the summary.
func (r *ptyRun) assertRestored(code int, summary string) {
	r.t.Helper()
	if code != exitInterrupted {
		r.t.Errorf("exit code %d, want %d\nstderr:\n%s", code, exitInterrupted, r.stderr.String())
	}
	out := r.output()
	after := out[strings.LastIndex(out, enterAltScreen)+len(enterAltScreen):]
	if !strings.Contains(after, leaveAltScreen) || !strings.Contains(after, showCursor) {
		r.t.Errorf("the terminal was not restored (leave alternate screen %v, show cursor %v)",
			strings.Contains(after, leaveAltScreen), strings.Contains(after, showCursor))
	}
	if summary != "" {
		tail := after[max(strings.LastIndex(after, leaveAltScreen), 0):]
		if !strings.Contains(tail, summary) {
			r.t.Errorf("no summary (%q) after the dashboard:\n%q\nstderr:\n%s", summary, tail, r.stderr.String())
		}
	}
}

// TestDashboardSignals: on a terminal, each interrupting signal stops
// demo, replay and attach, restores the terminal, prints the summary so far
// and exits 130.
func TestDashboardSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("starts latscope on pseudo-terminals")
	}
	rec := testutil.TinyRecording(t, t.TempDir(), "tiny.lsr")
	agent := startAgent(t, "--url", serveTinySim(t), "-c", "1", "--prompt-tokens", "32", "--output-tokens", "8", "--no-gpu", "--quiet")
	cases := []struct {
		name    string
		sig     syscall.Signal
		args    []string
		summary string
	}{
		{"demo SIGTERM", syscall.SIGTERM, []string{"demo", "--profile", "tiny", "--duration", "2m", "-c", "2", "--no-gpu"}, "Requests:"},
		{"replay SIGINT", syscall.SIGINT, []string{"replay", rec}, "Requests:"},
		{"attach SIGHUP", syscall.SIGHUP, []string{"attach", "http://" + agent.addr}, "== agent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := startOnPTY(t, tc.args...)
			r.waitFor(enterAltScreen, ptyOpenWait)
			if err := r.cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			code, took := r.waitExit(ptyExitWait)
			t.Logf("%s: exit %d %s after the signal", tc.name, code, took.Round(time.Millisecond))
			r.assertRestored(code, tc.summary)
		})
	}
}

// blackholeCollector accepts connections and never answers: an OTLP
// collector that hangs. accepted is signalled at each connection.
func blackholeCollector(t *testing.T) (url string, accepted <-chan struct{}) {
	t.Helper()
	addr, accepted := silentServer(t)
	return "http://" + addr, accepted
}

// TestSecondSignalExitsAtOnce: while the first signal's shutdown waits for
// a collector that never answers, a second one exits at once, 130, with
// the terminal restored.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts latscope on a pseudo-terminal")
	}
	collector, exporting := blackholeCollector(t)
	r := startOnPTY(t, "demo", "--profile", "tiny", "--duration", "2m", "-c", "2", "--no-gpu",
		"--otlp-export", collector, "--flush-timeout", "1m")
	r.waitFor(enterAltScreen, ptyOpenWait)
	// Only once an export hangs has the first signal's shutdown something
	// to wait for: on a busy host no request may have finished yet.
	select {
	case <-exporting:
	case <-time.After(ptyOpenWait):
		t.Fatalf("no export reached the collector within %s", ptyOpenWait)
	}
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r.waitFor(leaveAltScreen, ptyExitWait) // the dashboard is gone; the export waits
	if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code, took := r.waitExit(ptyExitWait)
	t.Logf("exit %d %s after the second signal", code, took.Round(time.Millisecond))
	r.assertRestored(code, "")
	if !strings.Contains(r.stderr.String(), "second signal") {
		t.Errorf("stderr does not say why it exited at once:\n%s", r.stderr.String())
	}
}

// TestSecondSignalRestoresTheTerminal: two signals at once, while the
// dashboard is up, still leave the terminal restored.
func TestSecondSignalRestoresTheTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts latscope on a pseudo-terminal")
	}
	r := startOnPTY(t, "replay", testutil.TinyRecording(t, t.TempDir(), "tiny.lsr"))
	r.waitFor(enterAltScreen, ptyOpenWait)
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	code, _ := r.waitExit(ptyExitWait)
	r.assertRestored(code, "")
}

// TestStoppedAgentEndsItsStreams: an agent stopped by a signal (its
// context cancelled) sends its dashboards the end of the stream before it
// stops serving: attach then ends as for a finished session, with the
// summary, instead of reconnecting to an agent that is gone.
func TestStoppedAgentEndsItsStreams(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--url", serveTinySim(t), "-c", "1", "--prompt-tokens", "32", "--output-tokens", "8", "--no-gpu", "--quiet")
	type result struct {
		out, stderr string
		err         error
	}
	attached := make(chan result, 1)
	go func() {
		out, stderr, err := execute(t, "attach", "http://"+a.addr, "--no-tui")
		attached <- result{out, stderr, err}
	}()
	// Stop the agent once attach streams from it.
	deadline := time.Now().Add(ptyOpenWait)
	for {
		resp, err := http.Get("http://" + a.addr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		var h struct{ Clients int }
		err = json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if h.Clients > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("attach did not connect")
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.wait()
	select {
	case r := <-attached:
		if r.err != nil || !strings.Contains(r.out, "Requests:") {
			t.Errorf("attach after the agent stopped: %v\n%s\n%s", r.err, r.out, r.stderr)
		}
	case <-time.After(ptyExitWait):
		t.Fatalf("attach still runs %s after the agent stopped: its stream was not ended\nagent:\n%s", ptyExitWait, a.stderr.String())
	}
}
