//go:build acceptance

package attribute

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/sim"
	"github.com/latscope/latscope/sim/simtest"
)

// HTTP/2 against the real-time simulator and Debian's nginx: a stream's
// TTFT is the same as an HTTP/1.1 request's on the same server (within a
// millisecond at the median), its stages are all there, and the streams go
// over as many connections as asked.

const (
	h2Batches     = 8  // the runs alternate protocols this many times each
	h2Batch       = 25 // requests per batch
	h2Concurrency = 4
	h2Connections = 2
)

// protoRun is one protocol's requests and the aggregator's summary of them.
type protoRun struct {
	client  *probe.Client
	agg     *aggregate.Aggregator
	reqs    []*event.Request
	summary aggregate.Summary
}

// newProtoRun is a run to url through hc.
func newProtoRun(t *testing.T, url string, hc *http.Client) *protoRun {
	t.Helper()
	client, err := probe.NewClient(probe.ClientConfig{BaseURL: url, Dialect: probe.DialectOpenAIChat, Model: sim.DefaultModel,
		HTTPClient: hc, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.CloseIdleConnections)
	return &protoRun{client: client, agg: aggregate.New(aggregate.Config{})}
}

// batch sends one batch (the first with a warm-up, which opens the
// connections) and adds it to the run.
func (p *protoRun) batch(t *testing.T, warmup int) {
	t.Helper()
	reqs, last, _ := runThrough(t, p.client, probe.LoadConfig{Concurrency: h2Concurrency, Requests: h2Batch, Warmup: warmup}, NewAttributor(AttributorConfig{}))
	for _, r := range reqs {
		if r.Warmup {
			continue
		}
		if !r.OK() {
			t.Fatalf("%s: %s (%s)", r.ID, r.Outcome, r.Error)
		}
		p.agg.Add(event.NewRequest(r))
		p.reqs = append(p.reqs, r)
	}
	if last != nil {
		p.agg.Add(event.Event{Kind: event.KindProbe, Probe: last})
	}
	p.summary = p.agg.Summary()
}

// compareOn runs HTTP/1.1 through h1 and HTTP/2 through h2 against url in
// alternating batches, so that a host whose load changes over the test
// weighs on both alike, and compares them.
func compareOn(t *testing.T, url string, h1, h2 *http.Client, withTLS bool) {
	t.Helper()
	r1, r2 := newProtoRun(t, url, h1), newProtoRun(t, url, h2)
	for i := range h2Batches {
		warmup := 0
		if i == 0 {
			warmup = 8
		}
		r1.batch(t, warmup)
		r2.batch(t, warmup)
	}
	if r1.reqs[0].HTTP2 != nil {
		t.Fatal("the HTTP/1.1 client spoke HTTP/2")
	}
	compareProtos(t, r1, r2, withTLS)
}

// medianTTFT is the median TTFT of reqs, in ms.
func medianTTFT(reqs []*event.Request) float64 {
	v := make([]float64, len(reqs))
	for i, r := range reqs {
		v[i] = float64(r.TTFT) / 1e6
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// compareProtos checks an HTTP/2 run against an HTTP/1.1 run on the same
// server: the medians of TTFT within a millisecond, every stream's stages,
// the connections asked for.
func compareProtos(t *testing.T, h1, h2 *protoRun, withTLS bool) {
	t.Helper()
	m1, m2 := medianTTFT(h1.reqs), medianTTFT(h2.reqs)
	for _, st := range []event.Stage{event.StageWrite, event.StageWaitHeaders, event.StageFirstToken} {
		t.Logf("%s p50: HTTP/1.1 %.3f ms, HTTP/2 %.3f ms", st, h1.summary.Stages[st].P50, h2.summary.Stages[st].P50)
	}
	t.Logf("median TTFT: HTTP/1.1 %.3f ms, HTTP/2 %.3f ms (%d requests each, %d streams over %d connections)",
		m1, m2, len(h1.reqs), h2Concurrency, h2Connections)
	if d := m2 - m1; d > 1 || d < -1 {
		t.Errorf("median TTFT over HTTP/2 %.3f ms, over HTTP/1.1 %.3f ms: want them within 1 ms", m2, m1)
	}
	opened := 0
	for _, r := range h2.reqs {
		if r.HTTP2 == nil || r.HTTP2.Stream == 0 || r.HTTP2.DataFrames == 0 {
			t.Fatalf("%s: stream %+v", r.ID, r.HTTP2)
		}
		for _, s := range event.ClientStages()[1:] {
			if !slices.ContainsFunc(r.Stages, func(st event.StageTiming) bool { return st.Stage == s }) {
				t.Fatalf("%s: no %s stage in %v", r.ID, s, r.Stages)
			}
		}
		if !r.ReusedConn {
			opened++
			if i := slices.IndexFunc(r.Stages, func(st event.StageTiming) bool { return st.Stage == event.StageTLS }); withTLS && r.Stages[i].Duration <= 0 {
				t.Errorf("%s opened a connection without a TLS handshake: %v", r.ID, r.Stages)
			}
		}
	}
	h := h2.summary.Requests.HTTP2
	if h == nil {
		t.Fatal("no HTTP/2 summary")
	}
	t.Logf("HTTP/2 summary: %+v", *h)
	// The warm-up's streams opened the connections; the measured ones found
	// them open.
	if h.Connections != h2Connections || opened != 0 {
		t.Errorf("%d connections opened, %d by measured streams; want %d, all by the warm-up", h.Connections, opened, h2Connections)
	}
}

func TestAcceptanceH2CMatchesHTTP1(t *testing.T) {
	url := simtest.ServeDeployed(t, sim.Config{Profile: tinyProfileA(t), ServerTiming: true, H2C: true, Seed: 5},
		sim.Deployment{Network: sim.Network{RTT: time.Millisecond}})
	hc, err := probe.NewH2Client(probe.H2Config{H2C: true, Connections: h2Connections})
	if err != nil {
		t.Fatal(err)
	}
	compareOn(t, url, probe.NewHTTPClient(nil), hc, false)
}

func TestAcceptanceNginxHTTP2(t *testing.T) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr != nil {
			t.Skip("SKIPPED: nginx is not installed (Debian's package nginx; .ci/run installs it), so the HTTP/2 check through nginx did not run")
		}
		bin = "/usr/sbin/nginx"
	}
	upstream := simtest.ServeDeployed(t, sim.Config{Profile: tinyProfileA(t), ServerTiming: true, Seed: 5}, sim.Deployment{NoProxy: true})
	cert, roots := nginxCert(t)
	url := startNginxTLS(t, bin, strings.TrimPrefix(upstream, "http://"), cert)
	tlsCfg := &tls.Config{RootCAs: roots}
	hc, err := probe.NewH2Client(probe.H2Config{TLS: tlsCfg, Connections: h2Connections})
	if err != nil {
		t.Fatal(err)
	}
	compareOn(t, url, probe.NewHTTPClient(tlsCfg), hc, true)
}

func tinyProfileA(t *testing.T) sim.Profile {
	t.Helper()
	p, err := sim.ProfileByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// nginxTLS is where nginx finds its certificate and key.
type nginxTLS struct{ cert, key string }

// nginxCert writes a self-signed certificate for 127.0.0.1 and its key to
// files for nginx, and returns them with the roots that trust it.
func nginxCert(t *testing.T) (*nginxTLS, *x509.CertPool) {
	t.Helper()
	cfg, certPEM, err := sim.SelfSignedTLS()
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(cfg.Certificates[0].PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := &nginxTLS{cert: filepath.Join(dir, "cert.pem"), key: filepath.Join(dir, "key.pem")}
	if err := os.WriteFile(files.cert, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(files.key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	return files, roots
}
