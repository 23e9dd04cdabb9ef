package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/latscope/latscope/agent"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/internal/fileread"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/session"
)

// maxSetupCall bounds one call before the run (detection, /tokenize) when
// --timeout is longer or zero: a server that takes longer than this to
// list its models is not going to be measured usefully.
const maxSetupCall = 10 * time.Second

// connect checks the target and the credential and TLS flags. --insecure is
// announced on stderr: it is never silently in effect.
func (f *loadFlags) connect(stderr io.Writer, target string) (*session.Connection, error) {
	if _, err := probe.ParseBaseURL(target); err != nil {
		return nil, fmt.Errorf("--url: %w", err)
	}
	headers, err := parseHeaders(f.headers)
	if err != nil {
		return nil, err
	}
	apiKey := f.apiKey
	if apiKey == "" {
		apiKey = os.Getenv("OPENAI_API_KEY")
	}
	auth, err := probe.AuthHeader(apiKey, headers)
	if err != nil {
		return nil, fmt.Errorf("--api-key (or $OPENAI_API_KEY): %w", err)
	}
	tlsConfig, err := loadTLS(f.caCert, f.insecure)
	if err != nil {
		return nil, err
	}
	proto, err := f.httpVersion(target)
	if err != nil {
		return nil, err
	}
	if f.insecure {
		fmt.Fprintln(stderr, "latscope: WARNING: --insecure: TLS certificates are NOT verified; anyone on the path can read the prompts and the API key")
	}
	return &session.Connection{
		Target: target, Shown: event.RedactURL(target), APIKey: apiKey, Headers: headers, Auth: auth,
		TLS: tlsConfig, Timeout: setupCallTimeout(f.timeout),
		HTTP: proto, Connections: f.h2Connections(),
	}, nil
}

// httpVersion is the protocol --http2 and --h2c ask for ("" for HTTP/1.1),
// checked against the target's scheme and --connections (0 where the
// command has no HTTP/2 flags: demo).
func (f *loadFlags) httpVersion(target string) (string, error) {
	https := strings.HasPrefix(strings.ToLower(target), "https:")
	h2 := f.http2 || f.h2c
	switch {
	case f.http2 && f.h2c:
		return "", errors.New("--http2 is HTTP/2 over TLS, --h2c without: give one")
	case h2 && (f.connections < 1 || f.connections > probe.MaxH2Connections):
		return "", fmt.Errorf("--connections %d: want 1 to %d", f.connections, probe.MaxH2Connections)
	case f.http2 && !https:
		return "", errors.New("--http2 needs an https:// URL (ALPN); for HTTP/2 without TLS give --h2c")
	case f.h2c && https:
		return "", errors.New("--h2c is HTTP/2 without TLS: give an http:// URL, or --http2 for https")
	case f.http2:
		return session.HTTP2, nil
	case f.h2c:
		return session.H2C, nil
	case f.connections > 1:
		return "", errors.New("--connections spreads HTTP/2 streams: give --http2 or --h2c (HTTP/1.1 opens a connection per concurrent stream)")
	}
	return "", nil
}

// h2Connections is --connections where HTTP/2 is spoken, else 0.
func (f *loadFlags) h2Connections() int {
	if f.http2 || f.h2c {
		return f.connections
	}
	return 0
}

// setupCallTimeout bounds each call before the run: --timeout, the limit
// for one request, but no more than maxSetupCall.
func setupCallTimeout(requestTimeout time.Duration) time.Duration {
	if requestTimeout <= 0 {
		return maxSetupCall
	}
	return min(requestTimeout, maxSetupCall)
}

// loadTLS builds the TLS settings of --ca-cert and --insecure; nil means the
// system's roots.
func loadTLS(caFile string, insecure bool) (*tls.Config, error) {
	switch {
	case caFile != "" && insecure:
		return nil, errors.New("--ca-cert and --insecure: give one or the other (--insecure skips the verification --ca-cert is for)")
	case insecure:
		return &tls.Config{InsecureSkipVerify: true}, nil //nolint:gosec // asked for, and announced on stderr
	case caFile == "":
		return nil, nil
	}
	pem, err := fileread.ReadFile(caFile, certLimit("--ca-cert"))
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca-cert %s: no PEM certificate in it", caFile)
	}
	return &tls.Config{RootCAs: pool}, nil
}

// parseHeaders reads the --header values ("Name: value"). Its errors
// number the flag instead of quoting it: the text may hold a credential.
func parseHeaders(raw []string) (http.Header, error) {
	h := http.Header{}
	for i, kv := range raw {
		name, value, ok := strings.Cut(kv, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" {
			return nil, fmt.Errorf(`--header number %d: want "Name: value" (not shown: it may hold a credential)`, i+1)
		}
		if err := probe.CheckHeader(name, value); err != nil {
			return nil, fmt.Errorf("--header number %d: %w", i+1, err)
		}
		h.Add(name, value)
	}
	return h, nil
}

// certLimit bounds a certificate or CA file named by flag.
func certLimit(flag string) fileread.Limit {
	return fileread.Limit{Flag: flag, Max: agent.MaxPEMBytes, What: "a certificate"}
}
