package sshserve

import (
	"bytes"
	"context"
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

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/tui"
)

// within bounds every wait of these tests: a wait ends on what it waits
// for, and this only says a test is stuck.
const within = 60 * time.Second

// clientKey makes a key pair: the signer a client logs in with and its
// authorized_keys line.
func clientKey(t *testing.T) (gossh.Signer, string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return signer, string(gossh.MarshalAuthorizedKey(signer.PublicKey()))
}

// served is a Server on a loopback port the kernel picked.
type served struct {
	srv  *Server
	addr string
	stop context.CancelFunc
	done chan error
}

func serve(t *testing.T, cfg Config, authorized ...string) *served {
	t.Helper()
	dir := t.TempDir()
	if cfg.AuthorizedKeys == "" {
		cfg.AuthorizedKeys = filepath.Join(dir, "authorized_keys")
		if err := os.WriteFile(cfg.AuthorizedKeys, []byte(strings.Join(authorized, "")), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if cfg.HostKey == "" {
		cfg.HostKey = filepath.Join(dir, "host_key")
	}
	if cfg.Feed == nil {
		cfg.Feed = frameFeed()
	}
	cfg.Addr = "127.0.0.1:0"
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &served{srv: srv, addr: ln.Addr().String(), stop: stop, done: make(chan error, 1)}
	go func() { s.done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		stop()
		select {
		case <-s.done:
		case <-time.After(within):
			t.Error("Serve did not return after its context ended")
		}
	})
	return s
}

// frameFeed is a finished session of a few requests, so that the screen
// has figures to show.
func frameFeed() tui.Feed {
	s := aggregate.Snapshot{Ended: true}
	s.Session = &event.Session{Name: "sshtest", Target: "http://127.0.0.1:8000"}
	return tui.StaticFeed{Snapshot: s, Finished: true}
}

// screen is one SSH session with a pty, its output collected.
type screen struct {
	t      *testing.T
	client *gossh.Client
	sess   *gossh.Session
	stdin  interface{ Write([]byte) (int, error) }

	mu   sync.Mutex
	out  bytes.Buffer
	more chan struct{}
	exit chan error
}

func dial(t *testing.T, addr string, key gossh.Signer) (*gossh.Client, error) {
	t.Helper()
	return gossh.Dial("tcp", addr, &gossh.ClientConfig{
		User:            "viewer",
		Auth:            []gossh.AuthMethod{gossh.PublicKeys(key)},
		HostKeyCallback: gossh.InsecureIgnoreHostKey(),
		Timeout:         within,
	})
}

// open logs in with key and opens a 120×40 terminal session.
func open(t *testing.T, addr string, key gossh.Signer) *screen {
	t.Helper()
	client, err := dial(t, addr, key)
	if err != nil {
		t.Fatalf("ssh: %v", err)
	}
	t.Cleanup(func() { client.Close() })
	sess, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	sc := &screen{t: t, client: client, sess: sess, more: make(chan struct{}, 1), exit: make(chan error, 1)}
	sess.Stdout = (*screenWriter)(sc)
	sess.Stderr = (*screenWriter)(sc)
	if sc.stdin, err = sess.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := sess.RequestPty("xterm-256color", 40, 120, gossh.TerminalModes{}); err != nil {
		t.Fatal(err)
	}
	if err := sess.Shell(); err != nil {
		t.Fatal(err)
	}
	go func() { sc.exit <- sess.Wait() }()
	return sc
}

type screenWriter screen

func (w *screenWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.out.Write(p)
	w.mu.Unlock()
	select {
	case w.more <- struct{}{}:
	default:
	}
	return len(p), nil
}

// text is the output so far without its escape sequences.
func (sc *screen) text() string {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return ansi.Strip(sc.out.String())
}

// raw is the output so far as sent.
func (sc *screen) raw() string {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.out.String()
}

// waitFor waits until the output holds want, and returns the output.
func (sc *screen) waitFor(want string) string {
	sc.t.Helper()
	deadline := time.After(within)
	for {
		if s := sc.text(); strings.Contains(s, want) {
			return s
		}
		select {
		case <-sc.more:
		case err := <-sc.exit:
			sc.exit <- err
			if s := sc.text(); strings.Contains(s, want) {
				return s
			}
			sc.t.Fatalf("the session ended (%v) without %q:\n%q", err, want, sc.text())
		case <-deadline:
			sc.t.Fatalf("%q not in the session's output:\n%q", want, sc.text())
		}
	}
}

// exitStatus waits for the session to end and returns its exit status.
func (sc *screen) exitStatus() int {
	sc.t.Helper()
	select {
	case err := <-sc.exit:
		var ee *gossh.ExitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &ee):
			return ee.ExitStatus()
		}
		sc.t.Fatalf("the session ended without an exit status: %v", err)
	case <-time.After(within):
		sc.t.Fatalf("the session did not end:\n%q", sc.text())
	}
	return -1
}

// The dashboard's header names the session; q ends the session, exit 0.
func TestAKeyInTheFileGetsTheDashboard(t *testing.T) {
	key, line := clientKey(t)
	s := serve(t, Config{}, line)
	sc := open(t, s.addr, key)
	sc.waitFor("sshtest")
	if _, err := sc.stdin.Write([]byte("q")); err != nil {
		t.Fatal(err)
	}
	if code := sc.exitStatus(); code != 0 {
		t.Fatalf("exit %d after q, want 0", code)
	}
	if out := sc.raw(); !strings.Contains(out, "\x1b[?1049l") {
		t.Errorf("the session did not leave the alternate screen:\n%q", out)
	}
}

// A key that is not in the file, and a password, get nothing.
func TestAKeyNotInTheFileIsRefused(t *testing.T) {
	_, line := clientKey(t)
	other, _ := clientKey(t)
	s := serve(t, Config{}, line)
	if _, err := dial(t, s.addr, other); err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
		t.Fatalf("ssh with another key: %v, want it refused", err)
	}
	_, err := gossh.Dial("tcp", s.addr, &gossh.ClientConfig{
		User: "viewer", Auth: []gossh.AuthMethod{gossh.Password("latscope")},
		HostKeyCallback: gossh.InsecureIgnoreHostKey(), Timeout: within,
	})
	if err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
		t.Fatalf("ssh with a password: %v, want it refused", err)
	}
}

// Each session has its own view: a key pressed in one changes its
// window only.
func TestEachSessionHasItsOwnView(t *testing.T) {
	key, line := clientKey(t)
	s := serve(t, Config{}, line)
	a, b := open(t, s.addr, key), open(t, s.addr, key)
	a.waitFor("sshtest")
	b.waitFor("sshtest")
	if _, err := a.stdin.Write([]byte("w")); err != nil {
		t.Fatal(err)
	}
	a.waitFor("[1m]")
	// b is drawn again after a's key only if its own view changed: end it
	// and read everything it was sent.
	if _, err := b.stdin.Write([]byte("q")); err != nil {
		t.Fatal(err)
	}
	if code := b.exitStatus(); code != 0 {
		t.Fatalf("exit %d after q, want 0", code)
	}
	if strings.Contains(b.text(), "[1m]") {
		t.Errorf("the other session's window changed too:\n%q", b.text())
	}
}

// At the cap, one more session is told so and closed (exit 1); the others
// go on.
func TestOneSessionOverTheCapIsToldAndClosed(t *testing.T) {
	key, line := clientKey(t)
	s := serve(t, Config{MaxSessions: 1}, line)
	first := open(t, s.addr, key)
	first.waitFor("sshtest")
	extra := open(t, s.addr, key)
	if code := extra.exitStatus(); code != 1 {
		t.Fatalf("the extra session exits %d, want 1:\n%q", code, extra.text())
	}
	if out := extra.text(); !strings.Contains(out, "already has 1 viewers") || !strings.Contains(out, "--ssh-max-sessions 1") {
		t.Errorf("the extra session is not told why:\n%q", out)
	}
	if n := s.srv.Sessions(); n != 1 {
		t.Errorf("%d sessions served, want the first one still", n)
	}
}

// Stopping the server ends every session: the terminal restored, the
// line that says why, exit 0; Serve returns.
func TestStoppingEndsTheSessionsCleanly(t *testing.T) {
	key, line := clientKey(t)
	s := serve(t, Config{Ended: "latscope: the agent stopped"}, line)
	a, b := open(t, s.addr, key), open(t, s.addr, key)
	a.waitFor("sshtest")
	b.waitFor("sshtest")
	s.stop()
	for _, sc := range []*screen{a, b} {
		if code := sc.exitStatus(); code != 0 {
			t.Errorf("exit %d when the server stopped, want 0", code)
		}
		out := sc.raw()
		end := strings.LastIndex(out, "\x1b[?1049l")
		if end < 0 || !strings.Contains(out[end:], "latscope: the agent stopped") {
			t.Errorf("the session did not leave the alternate screen and then say why it ended:\n%q", out)
		}
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
		s.done <- err
	case <-time.After(within):
		t.Fatal("Serve did not return")
	}
}

// A session without a terminal (ssh host command) is told to ask for one.
func TestASessionWithoutATerminalIsTold(t *testing.T) {
	key, line := clientKey(t)
	s := serve(t, Config{}, line)
	client, err := dial(t, s.addr, key)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	sess, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := sess.CombinedOutput("uptime")
	var ee *gossh.ExitError
	if !errors.As(err, &ee) || ee.ExitStatus() != 1 || !strings.Contains(string(out), "needs a terminal") {
		t.Fatalf("a command without a pty: %v, %q; want exit 1 and why", err, out)
	}
}
