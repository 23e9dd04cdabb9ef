package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	gossh "golang.org/x/crypto/ssh"
)

// sshKeys writes an authorized_keys file of one new key, and returns the
// key's signer and the file's path.
func sshKeys(t *testing.T, dir string) (gossh.Signer, string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(path, gossh.MarshalAuthorizedKey(signer.PublicKey()), 0o600); err != nil {
		t.Fatal(err)
	}
	return signer, path
}

// lockedBuffer collects a session's output for the test to read.
type lockedBuffer struct {
	mu  sync.Mutex
	b   bytes.Buffer
	got chan struct{}
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case l.got <- struct{}{}:
	default:
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// An agent started with --ssh serves its live dashboard to a key of the
// authorized keys file; stopping the agent ends the session cleanly: the
// terminal restored, a line that says why, exit 0.
func TestAgentServesTheDashboardOverSSH(t *testing.T) {
	dir := t.TempDir()
	key, keys := sshKeys(t, dir)
	hostKey := filepath.Join(dir, "host_key")
	agent := startAgent(t, "--url", serveTinySim(t), "--rate", "2", "--prompt-tokens", "16", "--output-tokens", "4",
		"--no-gpu", "--name", "ssh-agent", "--quiet", "--ssh", "127.0.0.1:0", "--ssh-authorized-keys", keys, "--ssh-host-key", hostKey)
	var addr string
	select {
	case addr = <-agent.ssh:
	case <-time.After(30 * time.Second):
		t.Fatal("the agent did not say where it serves the dashboard over ssh")
	}
	client, err := gossh.Dial("tcp", addr, &gossh.ClientConfig{User: "viewer", Auth: []gossh.AuthMethod{gossh.PublicKeys(key)},
		HostKeyCallback: gossh.InsecureIgnoreHostKey(), Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("ssh: %v", err)
	}
	defer client.Close()
	sess, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out := &lockedBuffer{got: make(chan struct{}, 1)}
	sess.Stdout, sess.Stderr = out, out
	if err := sess.RequestPty("xterm", 40, 120, gossh.TerminalModes{}); err != nil {
		t.Fatal(err)
	}
	if err := sess.Shell(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- sess.Wait() }()
	deadline := time.After(30 * time.Second)
	for !strings.Contains(ansi.Strip(out.String()), "@ssh-agent") {
		select {
		case <-out.got:
		case err := <-exited:
			t.Fatalf("the session ended (%v) before the dashboard showed:\n%q", err, out.String())
		case <-deadline:
			t.Fatalf("no dashboard within 30 s:\n%q", out.String())
		}
	}
	agent.wait()
	select {
	case err := <-exited:
		var ee *gossh.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("the session ended without an exit status: %v", err)
		}
		if err != nil {
			t.Fatalf("the session exits %d when the agent stops, want 0", ee.ExitStatus())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the session did not end with the agent")
	}
	raw := out.String()
	end := strings.LastIndex(raw, "\x1b[?1049l")
	if end < 0 || !strings.Contains(raw[end:], "latscope agent: stopped; this dashboard ends here") {
		t.Errorf("the session did not leave the alternate screen and say why it ended:\n%q", raw[max(0, len(raw)-400):])
	}
	if info, err := os.Stat(hostKey); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("host key: %v, want a file of mode 0600", err)
	}
}

// --ssh needs its keys; the keys without --ssh are a mistake said at once.
func TestAgentSSHFlagsGoTogether(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, keys := sshKeys(t, dir)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--ssh", "127.0.0.1:0", "--ssh-host-key", filepath.Join(dir, "k")}, "--ssh-authorized-keys"},
		{[]string{"--ssh", "127.0.0.1:0", "--ssh-authorized-keys", keys}, "--ssh-host-key"},
		{[]string{"--ssh-authorized-keys", keys}, "go with --ssh ADDR"},
	} {
		args := append([]string{"agent", "--url", "http://127.0.0.1:1", "--listen", "127.0.0.1:0"}, c.args...)
		_, _, err := execute(t, args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
}
