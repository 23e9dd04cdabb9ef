package agent

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/latscope/latscope/internal/fileread"
)

// DefaultListen is where an agent listens unless told otherwise: loopback
// only, so that nothing is exposed by accident.
const DefaultListen = "127.0.0.1:7070"

// TokenEnv names the environment variable the agent and attach commands
// read the token from when no flag gives it (a flag would show it in ps).
const TokenEnv = "LATSCOPE_TOKEN"

// ErrWeakToken is returned for a token too short to keep a secret, or one
// holding whitespace.
var ErrWeakToken = errors.New("refusing a weak token")

// ErrNoToken is returned for a non-loopback listen address without a token.
var ErrNoToken = errors.New("refusing to serve events beyond this machine without a token")

// ListenConfig says where and how the agent serves.
type ListenConfig struct {
	// Addr is host:port; empty means DefaultListen. A host other than a
	// loopback address (":7070", "0.0.0.0:7070", a LAN address or a host
	// name other than localhost) needs Token, unless InsecureNoAuth is set.
	Addr string
	// Token, when set, is required as "Authorization: Bearer <token>" on
	// /events and /metrics. It never appears in a log line, an error, an
	// event or a metric.
	Token string
	// InsecureNoAuth serves a non-loopback address without a token. It
	// exists for networks that are already private; it must be asked for.
	InsecureNoAuth bool
	// TLSCert and TLSKey are PEM files; both or neither.
	TLSCert, TLSKey string
}

func (c ListenConfig) addr() string {
	if c.Addr == "" {
		return DefaultListen
	}
	return c.Addr
}

// Validate checks the address and the TLS files, and refuses a
// non-loopback address without a token unless InsecureNoAuth is set.
func (c ListenConfig) Validate() error {
	host, _, err := net.SplitHostPort(c.addr())
	if err != nil {
		return fmt.Errorf("listen address %q: %w", c.addr(), err)
	}
	if !isLoopback(host) && c.Token == "" && !c.InsecureNoAuth {
		return fmt.Errorf("%w: listen address %q is reachable from other machines; "+
			"set a token (--token or LATSCOPE_TOKEN), listen on 127.0.0.1, "+
			"or pass --insecure-no-auth on purpose", ErrNoToken, c.addr())
	}
	if err := checkToken(c.Token); err != nil {
		return err
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("tls needs both a certificate and a key file")
	}
	if c.TLSCert != "" {
		if _, err := c.keyPair(); err != nil {
			return err
		}
	}
	return nil
}

// MaxPEMBytes bounds a certificate, key or CA file: real ones are a few
// KiB, and the limit keeps a path such as /dev/zero from being read on.
const MaxPEMBytes = fileread.MiB

// keyPair reads the certificate and its key, each a bounded regular file.
func (c ListenConfig) keyPair() (tls.Certificate, error) {
	cert, err := fileread.ReadFile(c.TLSCert, fileread.Limit{Flag: "--tls-cert", Max: MaxPEMBytes, What: "a certificate"})
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("load tls certificate: %w", err)
	}
	key, err := fileread.ReadFile(c.TLSKey, fileread.Limit{Flag: "--tls-key", Max: MaxPEMBytes, What: "a key"})
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("load tls certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("load tls certificate: --tls-cert %s, --tls-key %s: %w", c.TLSCert, c.TLSKey, err)
	}
	return pair, nil
}

// exposed reports whether the address reaches beyond this machine.
func (c ListenConfig) exposed() bool {
	host, _, err := net.SplitHostPort(c.addr())
	return err != nil || !isLoopback(host)
}

// isLoopback reports whether host names only this machine. An empty host
// means every interface; a host name other than localhost is not trusted to
// resolve to loopback.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// tlsConfig loads the certificate, or returns nil when TLS is off.
func (c ListenConfig) tlsConfig() (*tls.Config, error) {
	if c.TLSCert == "" {
		return nil, nil
	}
	cert, err := c.keyPair()
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// MinTokenLength is the shortest token the agent serves with: a shorter
// one is guessed, and a token of one space is a slip, not a secret.
const MinTokenLength = 16

// checkToken refuses a token that is set but short or holds whitespace
// (which no client could send intact in an Authorization header).
func checkToken(tok string) error {
	switch {
	case tok == "":
		return nil
	case strings.IndexFunc(tok, unicode.IsSpace) >= 0:
		return fmt.Errorf("%w: it holds whitespace, which no client can send in an Authorization header; use letters, digits and punctuation (for example: openssl rand -hex 16)", ErrWeakToken)
	case utf8.RuneCountInString(tok) < MinTokenLength:
		return fmt.Errorf("%w: %d characters, want %d or more (for example: openssl rand -hex 16)", ErrWeakToken, utf8.RuneCountInString(tok), MinTokenLength)
	}
	return nil
}
