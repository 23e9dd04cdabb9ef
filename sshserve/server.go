// Package sshserve serves the live dashboard over SSH: anyone whose public
// key is in the authorized keys file runs `ssh -p PORT host` and gets the
// dashboard in their own terminal, with nothing of latscope installed.
//
// Every session runs its own dashboard (tui.NewProgram) over one shared
// feed: its window, statistic and view change with its own keys only, and
// nothing it does reaches the measurement (it is read-only: no key of it
// pauses or seeks the feed). Only public keys get in; the server's host
// key lives in a file the user names (made, mode 0600, when absent). At
// most MaxSessions dashboards are served at once; one more is told so and
// closed. When the server stops, every dashboard restores its terminal,
// says why it ends, and its session exits 0.
package sshserve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/ssh"
	"github.com/charmbracelet/wish"
	"github.com/muesli/termenv"
	gossh "golang.org/x/crypto/ssh"

	"github.com/latscope/latscope/tui"
)

// DefaultMaxSessions is how many dashboards are served at once unless
// Config.MaxSessions says otherwise.
const DefaultMaxSessions = 8

// DefaultRefresh is how often a remote dashboard takes new figures unless
// Config.Dashboard.Refresh says otherwise: every two seconds, so that an
// idle viewer costs the server a few milliseconds of CPU a second (a
// redraw of the dashboard's charts costs about ten).
const DefaultRefresh = 2 * time.Second

// DefaultHandshakeTimeout bounds how long a connection may take to
// authenticate.
const DefaultHandshakeTimeout = 20 * time.Second

// stopTimeout bounds the wait for the sessions to end when the server
// stops; connections still open after it are closed.
const stopTimeout = 3 * time.Second

// Config configures a Server.
type Config struct {
	// Addr is where to listen, e.g. 127.0.0.1:2222 (--ssh).
	Addr string
	// AuthorizedKeys is a file of the public keys let in, one a line as in
	// ~/.ssh/authorized_keys (--ssh-authorized-keys). Required.
	AuthorizedKeys string
	// HostKey is the server's private key file (--ssh-host-key); an
	// Ed25519 key is made and written there when there is no file.
	HostKey string
	// MaxSessions is the most dashboards served at once;
	// DefaultMaxSessions when 0.
	MaxSessions int
	// HandshakeTimeout bounds a connection's authentication;
	// DefaultHandshakeTimeout when 0.
	HandshakeTimeout time.Duration
	// Feed is what every dashboard shows.
	Feed tui.Feed
	// Dashboard is what each dashboard starts with (window, statistic,
	// objectives, colour); its Input and Output are the session's.
	Dashboard tui.Options
	// Ended, when set, is the line a dashboard shows as the server stops,
	// e.g. "latscope: the agent stopped".
	Ended string
	// Logger logs sessions opened, refused and closed; nil logs nothing.
	Logger *slog.Logger
}

// Server serves dashboards over SSH.
type Server struct {
	cfg    Config
	keys   []ssh.PublicKey
	signer gossh.Signer
	// NewKey is set when the host key was made by New (there was no file).
	NewKey bool

	mu       sync.Mutex
	sessions int
	stopping bool
	stopped  chan struct{} // closed when the server stops
	conns    atomic.Int64  // open connections, authenticated or not
}

// New reads the authorized keys and the host key (making it when absent).
func New(cfg Config) (*Server, error) {
	if cfg.Feed == nil {
		return nil, errors.New("ssh dashboard: no feed")
	}
	if cfg.AuthorizedKeys == "" {
		return nil, errors.New("--ssh needs --ssh-authorized-keys FILE: the public keys let in (one a line, as in ~/.ssh/authorized_keys)")
	}
	if cfg.HostKey == "" {
		return nil, errors.New("--ssh needs --ssh-host-key FILE: where the server's private key is kept (made there when absent)")
	}
	if cfg.MaxSessions < 0 || cfg.HandshakeTimeout < 0 {
		return nil, errors.New("ssh dashboard: the session cap and the handshake timeout must not be negative")
	}
	cfg.MaxSessions = cmp.Or(cfg.MaxSessions, DefaultMaxSessions)
	cfg.Dashboard.Refresh = cmp.Or(cfg.Dashboard.Refresh, DefaultRefresh)
	cfg.HandshakeTimeout = cmp.Or(cfg.HandshakeTimeout, DefaultHandshakeTimeout)
	keys, err := readAuthorizedKeys(cfg.AuthorizedKeys)
	if err != nil {
		return nil, err
	}
	signer, created, err := hostSigner(cfg.HostKey)
	if err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, keys: keys, signer: signer, NewKey: created, stopped: make(chan struct{})}, nil
}

// Fingerprint is the host key's SHA-256 fingerprint as ssh prints it
// ("SHA256:..."), for users to check on their first connection.
func (s *Server) Fingerprint() string { return gossh.FingerprintSHA256(s.signer.PublicKey()) }

// Listen opens the listener Serve takes.
func (s *Server) Listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("--ssh %s: %w", s.cfg.Addr, err)
	}
	return ln, nil
}

// Sessions is how many dashboards are being served now.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions
}

// Serve serves dashboards on ln until ctx ends, then ends every session
// (each dashboard restores its terminal, shows Config.Ended and exits 0)
// and returns once they are closed, within a few seconds. It closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	// Public keys only: no password or keyboard-interactive handler is
	// set, so the server offers neither. The pty is emulated: the client's
	// terminal is the real one, and no pty is opened here per session.
	srv := &ssh.Server{ConnCallback: s.onConn}
	for _, opt := range []ssh.Option{
		wish.WithPublicKeyAuth(s.authorized),
		wish.WithMiddleware(func(ssh.Handler) ssh.Handler { return s.handle }),
		wish.WithVersion("latscope"),
		ssh.EmulatePty(),
	} {
		if err := srv.SetOption(opt); err != nil {
			return fmt.Errorf("ssh dashboard: %w", err)
		}
	}
	srv.AddHostKey(s.signer)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		s.stop()
		_ = srv.Close()
		return fmt.Errorf("ssh dashboard: %w", err)
	case <-ctx.Done():
	}
	s.stop()
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	err := srv.Shutdown(shutCtx)
	_ = srv.Close() // whatever did not end in time
	if e := <-served; err == nil && !errors.Is(e, ssh.ErrServerClosed) {
		err = e
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return nil // closed after the wait: nothing more to say
	}
	return err
}

// stop makes every session end.
func (s *Server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopping {
		s.stopping = true
		close(s.stopped)
	}
}

// authorized lets in a key of the authorized keys file, only.
func (s *Server) authorized(_ ssh.Context, key ssh.PublicKey) bool {
	for _, k := range s.keys {
		if ssh.KeysEqual(key, k) {
			return true
		}
	}
	return false
}

// onConn bounds the connections open at once (room for the session cap
// and for those refused with a message) and closes one that has not
// opened a session within the handshake timeout.
func (s *Server) onConn(ctx ssh.Context, conn net.Conn) net.Conn {
	if s.conns.Add(1) > int64(2*s.cfg.MaxSessions+4) {
		s.conns.Add(-1)
		s.log("ssh dashboard: too many connections; closing one", "remote", conn.RemoteAddr().String())
		return nil
	}
	o := &opened{ch: make(chan struct{})}
	ctx.SetValue(openedKey{}, o)
	go func() {
		defer s.conns.Add(-1)
		t := time.NewTimer(s.cfg.HandshakeTimeout)
		defer t.Stop()
		select {
		case <-o.ch:
		case <-ctx.Done(): // the connection ended
			return
		case <-t.C:
			_ = conn.Close() // no session in time
			return
		}
		<-ctx.Done()
	}()
	return conn
}

// openedKey is the context key of a connection's opened.
type openedKey struct{}

// opened is closed once the connection opened a session: it authenticated.
type opened struct {
	once sync.Once
	ch   chan struct{}
}

// markOpened tells the connection's watch (onConn) that it got a session.
func markOpened(ctx ssh.Context) {
	if o, ok := ctx.Value(openedKey{}).(*opened); ok {
		o.once.Do(func() { close(o.ch) })
	}
}

// handle serves one session: a dashboard of its own until its user quits,
// its connection ends or the server stops.
func (s *Server) handle(sess ssh.Session) {
	markOpened(sess.Context())
	user := sess.User() + "@" + sess.RemoteAddr().String()
	if refusal := s.acquire(); refusal != "" {
		s.log("ssh dashboard: session refused", "user", user, "why", refusal)
		fmt.Fprint(sess.Stderr(), "latscope: "+refusal+"\r\n")
		_ = sess.Exit(1)
		return
	}
	defer s.release()
	pty, winch, ok := sess.Pty()
	if !ok {
		fmt.Fprint(sess.Stderr(), "latscope: the dashboard needs a terminal: run ssh without a command (or with -t)\r\n")
		_ = sess.Exit(1)
		return
	}
	s.log("ssh dashboard: session opened", "user", user, "term", pty.Term, "width", pty.Window.Width, "height", pty.Window.Height)
	ended := s.run(sess, pty, winch)
	if ended && s.cfg.Ended != "" {
		fmt.Fprint(sess, s.cfg.Ended+"\r\n")
	}
	s.log("ssh dashboard: session closed", "user", user)
	_ = sess.Exit(0)
}

// run shows the dashboard in sess until it ends; ended says the server's
// stop ended it.
func (s *Server) run(sess ssh.Session, pty ssh.Pty, winch <-chan ssh.Window) (ended bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopWatch := context.AfterFunc(sess.Context(), cancel) // the client went away
	defer stopWatch()
	go func() {
		select {
		case <-s.stopped:
			cancel()
		case <-ctx.Done():
		}
	}()
	env := sshEnviron(append(sess.Environ(), "TERM="+pty.Term))
	opts := s.cfg.Dashboard
	if env.Getenv("NO_COLOR") != "" {
		opts.NoColor = true
	}
	// The renderer writes to the session as to a terminal (its pty is
	// emulated: the client's terminal is the real one), in the colours
	// the client's TERM and COLORTERM allow.
	r := lipgloss.NewRenderer(sess, termenv.WithEnvironment(env), termenv.WithUnsafe(), termenv.WithColorCache(true))
	prog := tui.NewProgram(readOnly{s.cfg.Feed}, opts, r, tea.WithContext(ctx), tea.WithInput(sess), tea.WithOutput(sess))
	// The window's size, first as the client asked for its pty, then at
	// each change. The channel is drained until the session's requests
	// end (the SSH library closes it then), so a resize never blocks them.
	go func() {
		for w := range winch {
			prog.Send(tea.WindowSizeMsg{Width: w.Width, Height: w.Height})
		}
	}()
	_, err := prog.Run()
	select {
	case <-s.stopped:
		return true
	default:
	}
	if err != nil && !errors.Is(err, tea.ErrProgramKilled) && !errors.Is(err, tea.ErrInterrupted) {
		s.log("ssh dashboard: session failed", "err", err)
	}
	return false
}

// acquire counts a new session in, or says why it is refused.
func (s *Server) acquire() (refusal string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.stopping:
		return "the dashboard is stopping"
	case s.sessions >= s.cfg.MaxSessions:
		return fmt.Sprintf("this dashboard already has %d viewers, the most it serves (--ssh-max-sessions %d); try again later", s.sessions, s.cfg.MaxSessions)
	}
	s.sessions++
	return ""
}

func (s *Server) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions--
}

func (s *Server) log(msg string, args ...any) {
	if s.cfg.Logger != nil {
		s.cfg.Logger.Info(msg, args...)
	}
}

// readOnly hides whatever else a feed can do (pause, seek a replay): a
// remote viewer changes only their own view.
type readOnly struct{ f tui.Feed }

func (r readOnly) Frame() (tui.Frame, uint64) { return r.f.Frame() }

// sshEnviron is a session's environment, as termenv reads it.
type sshEnviron []string

func (e sshEnviron) Environ() []string { return e }

// Getenv returns the last value of k (the later assignment wins).
func (e sshEnviron) Getenv(k string) string {
	v := ""
	for _, kv := range e {
		if name, val, ok := strings.Cut(kv, "="); ok && name == k {
			v = val
		}
	}
	return v
}
