package probe

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
)

// describeError says why a call to the server failed, in the user's terms.
// It drops the *url.Error that net/http wraps around every failure: that
// names the whole URL, which may carry credentials, and buries the cause.
func describeError(err error) string {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	var (
		redirect  *redirectError
		dnsErr    *net.DNSError
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		invalid   x509.CertificateInvalidError
		record    tls.RecordHeaderError
		opErr     *net.OpError
	)
	addr := "the server"
	if errors.As(err, &opErr) && opErr.Addr != nil {
		addr = opErr.Addr.String()
	}
	switch {
	case errors.As(err, &redirect):
		return redirect.Error()
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return fmt.Sprintf("unknown host %s: the name does not resolve", dnsErr.Name)
		}
		return fmt.Sprintf("could not look up %s: %s", dnsErr.Name, dnsErr.Err)
	case errors.As(err, &unknownCA):
		return "TLS: the server's certificate is signed by an authority latscope does not trust " +
			"(trust it with --ca-cert FILE, or skip verification with --insecure)"
	case errors.As(err, &hostErr):
		return "TLS: " + hostErr.Error()
	case errors.As(err, &invalid):
		return "TLS: " + invalid.Error()
	case errors.As(err, &record):
		return "TLS handshake failed: the server does not speak TLS on that port (try http://)"
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return "the server answered in plain HTTP, not TLS (try http://)"
	case strings.Contains(err.Error(), "malformed HTTP"):
		return "the server's answer is not HTTP (is that the right port?)"
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("connection refused by %s: nothing listens on that port", addr)
	case errors.Is(err, syscall.ECONNRESET):
		return fmt.Sprintf("connection reset by %s", addr)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the server closed the connection without answering"
	case opErr != nil && opErr.Timeout():
		return fmt.Sprintf("no answer from %s (%s timed out)", addr, opErr.Op)
	}
	return err.Error()
}

// redactor removes known secrets (the API key and --header values) from
// text that came back from the server, such as an error body that echoes
// the key it refused. Short values are left alone: replacing "1" or "yes"
// everywhere would garble messages, and they are not credentials.
type redactor []string

// minSecretLen is the shortest header value treated as a secret.
const minSecretLen = 6

// newRedactor collects the secrets in h: every header value long enough to
// be a credential, and the token of an Authorization header on its own.
func newRedactor(h http.Header) redactor {
	var r redactor
	for _, vs := range h {
		for _, v := range vs {
			if len(v) >= minSecretLen {
				r = append(r, v)
			}
			if _, token, ok := strings.Cut(v, " "); ok && len(token) >= minSecretLen {
				r = append(r, token)
			}
		}
	}
	return r
}

// clean returns s with every secret replaced by REDACTED.
func (r redactor) clean(s string) string {
	for _, secret := range r {
		if strings.Contains(s, secret) {
			s = strings.ReplaceAll(s, secret, "REDACTED")
		}
	}
	return s
}
