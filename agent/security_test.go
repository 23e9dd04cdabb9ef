package agent

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

func TestListenRefusesAnExposedAddressWithoutAToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cfg    ListenConfig
		refuse bool
	}{
		{ListenConfig{}, false}, // the default is loopback
		{ListenConfig{Addr: "127.0.0.1:7070"}, false},
		{ListenConfig{Addr: "[::1]:7070"}, false},
		{ListenConfig{Addr: "localhost:7070"}, false},
		{ListenConfig{Addr: ":7070"}, true},
		{ListenConfig{Addr: "0.0.0.0:7070"}, true},
		{ListenConfig{Addr: "10.1.2.3:7070"}, true},
		{ListenConfig{Addr: "gpu-box:7070"}, true},
		{ListenConfig{Addr: "0.0.0.0:7070", Token: "t-0123456789abcdef"}, false},
		{ListenConfig{Addr: "0.0.0.0:7070", InsecureNoAuth: true}, false},
	}
	for _, tt := range tests {
		_, err := New(Config{Listen: tt.cfg})
		if got := errors.Is(err, ErrNoToken); got != tt.refuse {
			t.Errorf("%+v: err = %v, want refused %v", tt.cfg, err, tt.refuse)
		}
		if tt.refuse {
			msg := err.Error()
			for _, hint := range []string{tt.cfg.Addr, "token", "LATSCOPE_TOKEN", "--insecure-no-auth"} {
				if !strings.Contains(msg, hint) {
					t.Errorf("%+v: message %q does not say %q", tt.cfg, msg, hint)
				}
			}
		}
	}
	if _, err := New(Config{Listen: ListenConfig{TLSCert: "cert.pem"}}); err == nil {
		t.Error("a certificate without a key was accepted")
	}
	if _, err := New(Config{Listen: ListenConfig{Addr: "no-port"}}); err == nil {
		t.Error("an address without a port was accepted")
	}
}

const (
	rightToken = "tok-RIGHT-7f3a9c"
	wrongToken = "tok-WRONG-1b2c3d"
)

func TestWrongTokenIsRefusedCountedAndNeverShown(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a := startAgent(t, Config{Listen: ListenConfig{Token: rightToken}, Logger: logger})
	publishAll(t, a.Server, sessionEvent("rack-7"), requestEvent(1))

	for _, tt := range []struct{ path, token string }{
		{"/events", ""}, {"/events", wrongToken}, {"/metrics", wrongToken}, {"/metrics", ""},
	} {
		resp, body := get(t, a, tt.path, tt.token)
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Fatalf("%s with token %q: %s, want 401 with a challenge", tt.path, tt.token, resp.Status)
		}
		if strings.Contains(body, rightToken) || strings.Contains(body, wrongToken) {
			t.Fatalf("401 body shows a token: %q", body)
		}
	}
	if resp, _ := get(t, a, "/healthz", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz without a token: %s, want 200 (it is open by design)", resp.Status)
	}

	// The attach client with the wrong token gives up with a clear error.
	var clientLogs lockedBuffer
	bad := attach(t, ClientConfig{URL: a.url, Token: wrongToken,
		Logger: slog.New(slog.NewTextHandler(&clientLogs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	_, err := bad.finish(t)
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("Run with the wrong token = %v, want ErrUnauthorized", err)
	}

	// The right token gets the stream.
	good := attach(t, ClientConfig{URL: a.url, Token: rightToken,
		Logger: slog.New(slog.NewTextHandler(&clientLogs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	good.untilState(t, Streaming)

	_, metrics := get(t, a, "/metrics", rightToken)
	for _, want := range []string{
		MetricUnauthorized + `{path="/events"} 3`, // two by hand, one by the attach client
		MetricUnauthorized + `{path="/metrics"} 2`,
	} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("/metrics lacks %q", want)
		}
	}
	_, health := get(t, a, "/healthz", "")
	a.End()
	events, err2 := good.finish(t)
	if err2 != nil || len(events) != 2 || events[0].Session == nil {
		t.Fatalf("with the right token: %d events, %v; want the header and a request", len(events), err2)
	}

	outputs := map[string]string{
		"agent log": logs.String(), "client log": clientLogs.String(), "metrics": metrics, "healthz": health,
		"client error": err.Error(), "client status": good.Status().Err + bad.Status().Err,
	}
	for _, ev := range events {
		b, _ := event.Marshal(ev)
		outputs["events"] += string(b)
	}
	for name, out := range outputs {
		for _, tok := range []string{rightToken, wrongToken} {
			if strings.Contains(out, tok) {
				t.Errorf("the %s shows a token: %q", name, out)
			}
		}
	}
	if !strings.Contains(logs.String(), "refused") {
		t.Errorf("the agent's log does not mention the refusals: %q", logs.String())
	}
}

func TestAttachOverTLSWithAPrivateCA(t *testing.T) {
	t.Parallel()
	cert, key := selfSignedCert(t)
	a := startAgent(t, Config{Listen: ListenConfig{Token: rightToken, TLSCert: cert, TLSKey: key}})
	want := publishAll(t, a.Server, sessionEvent("tls"), requestEvent(1))
	a.End()

	c := attach(t, ClientConfig{URL: a.url, Token: rightToken, CAFile: cert})
	got, err := c.finish(t)
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, got, want)

	untrusting := attach(t, ClientConfig{URL: a.url, Token: rightToken})
	if _, err := untrusting.finish(t); !errors.Is(err, ErrUntrusted) {
		t.Fatalf("without the CA: %v, want ErrUntrusted", err)
	}
}

// selfSignedCert writes a certificate for 127.0.0.1 and its key, and
// returns their paths; the certificate is its own CA.
func selfSignedCert(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "latscope test agent"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// A token that is short or holds whitespace is refused before the agent
// serves: every client would get 401 for it, or guess it.
func TestWeakTokensRefused(t *testing.T) {
	t.Parallel()
	for tok, refuse := range map[string]bool{" ": true, "t": true, "fifteen-chars-x": true, "0123456789abcdef 0123": true,
		"0123456789abcdef\t": true, "0123456789abcdef": false, "": false} {
		err := ListenConfig{Addr: "127.0.0.1:7070", Token: tok}.Validate()
		if got := errors.Is(err, ErrWeakToken); got != refuse {
			t.Errorf("token %q: err %v, want refused %v", tok, err, refuse)
		}
	}
}
