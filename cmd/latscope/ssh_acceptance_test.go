//go:build acceptance

package main

// The dashboard over ssh with Debian's OpenSSH client: the agent (or the
// watch) is this test binary run as `latscope agent --ssh` (`latscope
// watch --ssh`) in a process of its own (so its CPU time can be read from
// /proc), the client runs in tmux panes.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latscope/latscope/sim"
)

// sshAgent is `latscope agent --ssh` (or `latscope watch --ssh`) in a
// process of its own.
type sshAgent struct {
	cmd    *exec.Cmd
	stderr *watchedBuffer
	exited chan error
	port   string
	key    string // the client's private key (OpenSSH's ssh-keygen made it)
	name   string
	who    string                   // "latscope agent" or "latscope watch": the end message's
	shown  func(screen string) bool // the dashboard is on the screen
}

// startSSHAgent makes a key pair with ssh-keygen, and runs an agent that
// lets that key in over ssh, measuring the tiny simulator at 1 request a
// second; extra are more of its flags. It skips where OpenSSH's client is missing.
func startSSHAgent(t *testing.T, extra ...string) *sshAgent {
	t.Helper()
	a := &sshAgent{name: "ssh-agent", who: "latscope agent"}
	a.shown = func(s string) bool { return strings.Contains(s, "@"+a.name) && strings.Contains(s, "q quit") }
	return a.start(t, func(keys, hostKey string) []string {
		return append([]string{"agent", "--url", serveTinySim(t), "--listen", "127.0.0.1:0", "--rate", "1", "--prompt-tokens", "16",
			"--output-tokens", "4", "--no-gpu", "--name", a.name, "--quiet", "--ssh", "127.0.0.1:0",
			"--ssh-authorized-keys", keys, "--ssh-host-key", hostKey}, extra...)
	})
}

// startSSHWatch runs `latscope watch --ssh` on the tiny simulator serving
// users' traffic of its own (20 requests a second), as startSSHAgent runs
// the agent.
func startSSHWatch(t *testing.T) *sshAgent {
	t.Helper()
	url := serveTinySimWith(t, sim.Config{Background: sim.Background{Rate: 20, PromptTokens: 32, OutputTokens: 8}})
	a := &sshAgent{who: "latscope watch"}
	a.shown = func(s string) bool { return strings.Contains(s, "your users") && strings.Contains(s, "q quit") }
	return a.start(t, func(keys, hostKey string) []string {
		return []string{"watch", "--url", url, "--no-tui", "--no-gpu", "--ssh", "127.0.0.1:0",
			"--ssh-authorized-keys", keys, "--ssh-host-key", hostKey}
	})
}

// start makes the key pair and runs the command args gives for its files.
func (a *sshAgent) start(t *testing.T, args func(keys, hostKey string) []string) *sshAgent {
	t.Helper()
	for _, bin := range []string{"ssh", "ssh-keygen"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s is not installed (apt-get install openssh-client): the dashboard-over-ssh test needs it", bin)
		}
	}
	dir := t.TempDir()
	a.key, a.exited = filepath.Join(dir, "viewer"), make(chan error, 1)
	a.stderr = newWatchedBuffer(`dashboard over ssh on 127\.0\.0\.1:\d+`)
	sshKeygen(t, a.key)
	a.cmd = exec.Command(os.Args[0], "-test.run=^$")
	a.cmd.Env = append(os.Environ(), "LATSCOPE_TEST_MAIN="+strings.Join(args(a.key+".pub", filepath.Join(dir, "host_key")), "\x1f"))
	a.cmd.Stderr = a.stderr
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { a.exited <- a.cmd.Wait() }()
	t.Cleanup(func() {
		_ = a.cmd.Process.Kill()
		<-a.exited
	})
	select {
	case <-a.stderr.seen:
	case err := <-a.exited:
		t.Fatalf("%s exited (%v) before serving ssh:\n%s", a.who, err, a.stderr.String())
	case <-time.After(time.Minute):
		t.Fatalf("%s did not serve ssh within a minute:\n%s", a.who, a.stderr.String())
	}
	m := regexp.MustCompile(`dashboard over ssh on (127\.0\.0\.1:\d+)`).FindStringSubmatch(a.stderr.String())
	_, a.port, _ = net.SplitHostPort(m[1])
	return a
}

// sshKeygen makes an Ed25519 key pair at path and path.pub.
func sshKeygen(t *testing.T, path string) {
	t.Helper()
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "latscope-test", "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
}

// sshArgs is the client's command line with key, as a user types it.
func (a *sshAgent) sshArgs(key string) []string {
	return []string{"ssh", "-p", a.port, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "LogLevel=ERROR", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-i", key, "127.0.0.1"}
}

// sshViewer is OpenSSH's client in a tmux pane.
type sshViewer struct {
	*tmuxPane
	// exitFile receives ssh's exit status from the pane's shell once ssh
	// ends. The shell reaps ssh: tmux 3.3a on a busy host was seen to
	// leave its exited child a zombie, its pane never marked dead.
	exitFile string
}

// viewer runs ssh under tmux and waits for the dashboard; it returns the
// viewer and how long the first screen took.
func (a *sshAgent) viewer(t *testing.T) (*sshViewer, time.Duration) {
	t.Helper()
	exitFile := filepath.Join(t.TempDir(), "ssh-exit")
	p := startTmuxScript(t, strings.Join(a.sshArgs(a.key), " ")+"\necho $? > "+exitFile+".tmp && mv "+exitFile+".tmp "+exitFile)
	_, took := p.waitFor("the dashboard over ssh", 30*time.Second, a.shown)
	return &sshViewer{tmuxPane: p, exitFile: exitFile}, took
}

// exitStatus waits up to within for ssh to end and returns its exit
// status.
func (v *sshViewer) exitStatus(within time.Duration) (string, bool) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if data, err := os.ReadFile(v.exitFile); err == nil {
			return strings.TrimSpace(string(data)), true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return "", false
}

// cpu is the agent's CPU time so far (user and system), from /proc.
func (a *sshAgent) cpu(t *testing.T) time.Duration {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", a.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command's name (in parentheses, which may
	// hold spaces): utime and stime are the 14th and 15th of the line.
	rest := string(data[strings.LastIndexByte(string(data), ')')+2:])
	f := strings.Fields(rest)
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatalf("/proc/%d/stat: %v", a.cmd.Process.Pid, err)
	}
	const ticks = 100 // USER_HZ, 100 on Linux
	return time.Duration(utime+stime) * time.Second / ticks
}

// OpenSSH under tmux shows the agent's dashboard within 3 s; a key not in
// the authorized keys file is refused (exit 255, "Permission denied");
// SIGTERM to the agent ends the session cleanly (the client exits 0,
// having been told why).
func TestSSHDashboardWithOpenSSH(t *testing.T) {
	checkSSHDashboard(t, startSSHAgent(t))
}

// The same for the watch's dashboard (your users' traffic).
func TestSSHWatchDashboardWithOpenSSH(t *testing.T) {
	checkSSHDashboard(t, startSSHWatch(t))
}

func checkSSHDashboard(t *testing.T, a *sshAgent) {
	p, took := a.viewer(t)
	t.Logf("first screen over ssh after %v", took.Round(time.Millisecond))
	if took > 3*time.Second {
		t.Errorf("the dashboard took %v to show over ssh, want within 3 s", took)
	}

	other := filepath.Join(t.TempDir(), "stranger")
	sshKeygen(t, other)
	args := a.sshArgs(other)
	out, err := exec.Command(args[0], append(args[1:], "true")...).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 255 || !strings.Contains(string(out), "Permission denied") {
		t.Errorf("ssh with a key not in the file: %v, %q; want exit 255 and Permission denied", err, out)
	}

	start := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, ended := p.exitStatus(30 * time.Second)
	if !ended {
		t.Fatalf("ssh did not end within 30 s of the SIGTERM to %s:\n%s", a.who, p.screen())
	}
	t.Logf("ssh ended %v after the SIGTERM to %s", time.Since(start).Round(time.Millisecond), a.who)
	if code != "0" {
		t.Errorf("ssh exited %s when %s stopped, want 0:\n%s", code, a.who, p.screen())
	}
	if screen := p.tmux("capture-pane", "-p", "-S", "-", "-t", "t"); !strings.Contains(screen, a.who+": stopped; this dashboard ends here") {
		t.Errorf("the terminal does not say why the dashboard ended:\n%s", screen)
	}
	select {
	case <-a.exited:
		a.exited <- nil // for the cleanup
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit within 30 s of SIGTERM:\n%s", a.who, a.stderr.String())
	}
}

// Ten idle dashboards over ssh (no key pressed; the agent measuring one
// request a second, so their figures move) cost the agent at most 10 ms
// of CPU a second each, over what it spends without them.
func TestSSHIdleSessionsCost(t *testing.T) {
	const sessions, span = 10, 10 * time.Second
	a := startSSHAgent(t, "--ssh-max-sessions", strconv.Itoa(sessions))
	time.Sleep(2 * time.Second) // past the start's own work
	before := a.cpu(t)
	time.Sleep(span)
	alone := a.cpu(t) - before
	for range sessions {
		a.viewer(t)
	}
	time.Sleep(2 * time.Second) // past the sessions' first screens
	before = a.cpu(t)
	time.Sleep(span)
	with := a.cpu(t) - before
	perSession := float64(with-alone) / float64(time.Millisecond) / span.Seconds() / sessions
	t.Logf("agent CPU: %.1f ms/s alone, %.1f ms/s with %d idle ssh dashboards: %.2f ms/s each",
		float64(alone)/float64(time.Millisecond)/span.Seconds(), float64(with)/float64(time.Millisecond)/span.Seconds(), sessions, perSession)
	if perSession > 10 {
		t.Errorf("each idle ssh dashboard costs the agent %.2f ms of CPU a second, want at most 10", perSession)
	}
}
