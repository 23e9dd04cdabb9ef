package sim

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"time"
)

// front is how the first hop (the proxy, or the server without one) speaks
// to its clients: HTTP/1.1 always; with h2c also HTTP/2 without TLS, with
// prior knowledge; with tls HTTPS, where ALPN offers h2 and http/1.1.
type front struct {
	h2c bool
	tls *tls.Config
}

// front is the Config's client-facing protocols.
func (c Config) front() front { return front{h2c: c.H2C, tls: c.TLS} }

// validateFront checks that the protocols asked for fit together and with
// the modes that live in an HTTP/1.1 connection.
func (c Config) validateFront() error {
	switch {
	case c.H2C && c.TLS != nil:
		return errors.New("h2c is HTTP/2 without TLS: with TLS, HTTP/2 is offered through ALPN already")
	case (c.H2C || c.TLS != nil) && (c.CloseAfterStream || c.Nagle):
		return errors.New("close-after-stream and nagle act on a plain HTTP/1.1 connection: not with h2c or TLS")
	case c.TLS != nil && len(c.TLS.Certificates) == 0 && c.TLS.GetCertificate == nil:
		return errors.New("TLS without a certificate")
	}
	return nil
}

// serve runs srv on ln with f's protocols until srv is shut down.
func (f front) serve(srv *http.Server, ln net.Listener) error {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(f.h2c)
	p.SetHTTP2(f.tls != nil)
	srv.Protocols = &p
	if f.tls == nil {
		return srv.Serve(ln)
	}
	srv.TLSConfig = f.tls.Clone()
	return srv.ServeTLS(ln, "", "") // offers h2 and http/1.1 through ALPN
}

// Scheme is the URL scheme clients reach the server with: https with TLS.
func (c Config) Scheme() string {
	if c.TLS != nil {
		return "https"
	}
	return "http"
}

// selfSignedValidity is how long a generated certificate is valid.
const selfSignedValidity = 7 * 24 * time.Hour

// SelfSignedTLS returns a TLS configuration holding a new self-signed
// certificate for localhost, 127.0.0.1 and ::1, made in memory (ECDSA
// P-256). Clients trust it with the certificate itself: its Leaf, or the
// PEM returned beside it.
func SelfSignedTLS() (*tls.Config, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate a key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, fmt.Errorf("draw a serial number: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "latscope sim"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(selfSignedValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("create a certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("read the certificate back: %w", err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, certPEM, nil
}

// TLSFor is the certificate a command line asks for: the PEM files
// certFile and keyFile (both or neither), else a self-signed one when
// selfSigned, else nil (plain HTTP).
func TLSFor(certFile, keyFile string, selfSigned bool) (*tls.Config, error) {
	switch {
	case (certFile == "") != (keyFile == ""):
		return nil, errors.New("--tls-cert and --tls-key go together")
	case certFile != "":
		return LoadTLS(certFile, keyFile)
	case selfSigned:
		cfg, _, err := SelfSignedTLS()
		return cfg, err
	}
	return nil, nil
}

// ProtocolsNote says which HTTP versions the server speaks beyond
// HTTP/1.1, for a start line; selfSigned: its certificate was made at
// start, so clients need --insecure.
func (c Config) ProtocolsNote(selfSigned bool) string {
	switch {
	case c.H2C:
		return "; HTTP/2 without TLS (h2c, prior knowledge) beside HTTP/1.1"
	case c.TLS != nil && !selfSigned:
		return "; HTTPS, HTTP/2 and HTTP/1.1 through ALPN"
	case c.TLS != nil:
		return "; HTTPS with a self-signed certificate made at start (clients: --insecure), HTTP/2 and HTTP/1.1 through ALPN"
	}
	return ""
}

// LoadTLS returns a TLS configuration serving the certificate and key in
// the PEM files certFile and keyFile.
func LoadTLS(certFile, keyFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load the TLS certificate and key: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
