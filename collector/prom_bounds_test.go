package collector

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// hugePage serves a page of n gauge series, written as it goes (about 40
// bytes a line: n = 700,000 is the 27 MB page that once took 1.75 GB),
// and counts the bytes the client took.
func hugePage(t *testing.T, n int) (url string, written *atomic.Int64) {
	t.Helper()
	written = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var buf bytes.Buffer
		buf.WriteString("# TYPE vllm:num_requests_waiting gauge\n")
		for i := range n {
			fmt.Fprintf(&buf, "vllm:num_requests_waiting{engine=\"%d\"} 1\n", i)
			if buf.Len() > 64<<10 || i == n-1 {
				m, err := w.Write(buf.Bytes())
				written.Add(int64(m))
				if err != nil {
					return
				}
				buf.Reset()
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics", written
}

// TestPromHugePageIsBounded scrapes a 700k-series page: the scrape stops
// reading at the line limit, says so, and allocates a bounded amount. Not
// parallel, so that the allocation count is this test's own.
func TestPromHugePageIsBounded(t *testing.T) {
	url, written := hugePage(t, 700_000)
	p, err := NewProm(PromConfig{URL: url, Timeout: promWait})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	_, err = p.Scrape(context.Background())
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	want := fmt.Sprintf("metrics page over the limit: %s has more than %d lines; it is not scraped", url, DefaultMaxLines)
	if !errors.Is(err, ErrPageTooLarge) || err.Error() != want {
		t.Fatalf("scrape of a 700k-line page: %v, want %q", err, want)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("refused after %v, %d of about 27 MB sent, %d MB allocated", took, written.Load(), alloc>>20)
	if alloc > 200<<20 {
		t.Errorf("the scrape allocated %d MB: not bounded", alloc>>20)
	}
	if written.Load() > 8<<20 {
		t.Errorf("the client read %d bytes of the page, want it to stop near the limit", written.Load())
	}
}

func TestPromPageLimits(t *testing.T) {
	t.Parallel()
	url, _ := hugePage(t, 2000)
	cases := []struct {
		name string
		cfg  PromConfig
		want string // "" for a good scrape
	}{
		{name: "within", cfg: PromConfig{MaxLines: 2001, MaxBodyBytes: 1 << 20}},
		{name: "lines", cfg: PromConfig{MaxLines: 2000}, want: "has more than 2000 lines"},
		{name: "bytes", cfg: PromConfig{MaxBodyBytes: 10_000}, want: "has more than 10000 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.cfg.URL, tc.cfg.Timeout = url, promWait
			p, err := NewProm(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			s, err := p.Scrape(context.Background())
			switch {
			case tc.want == "" && (err != nil || len(s.Families["vllm:num_requests_waiting"].Series) != 2000):
				t.Errorf("scrape within the limits: %v", err)
			case tc.want != "" && (!errors.Is(err, ErrPageTooLarge) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("scrape over the limit: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestPromParsingKeepsTheDeadline: a page that never ends, sent as fast as
// the client reads it (so the parser is always busy), still ends the
// scrape at its timeout, and a cancelled run returns at once.
func TestPromParsingKeepsTheDeadline(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Comments keep the parser busy without adding to what it holds.
		line := []byte(strings.Repeat("# filler that the parser reads and drops\n", 1000))
		_, _ = w.Write([]byte("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n"))
		for r.Context().Err() == nil {
			if _, err := w.Write(line); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	const timeout = 300 * time.Millisecond
	p, err := NewProm(PromConfig{URL: srv.URL, Timeout: timeout, MaxLines: 1 << 40, MaxBodyBytes: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	// The timeout's own error is the check (the page never ends, so only
	// the deadline can end the scrape); how soon depends on the host.
	_, err = p.Scrape(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no complete answer from "+srv.URL+" within 300ms") {
		t.Errorf("endless page: %v, want the timeout's error (%v)", err, timeout)
	}

	r := startProm(t, PromConfig{URL: srv.URL, Interval: time.Hour, Timeout: time.Hour, MaxLines: 1 << 40, MaxBodyBytes: 1 << 40})
	r.stop() // waits for Run, bounded by promWait
}

// TestPromHeaderAndCredentials: the configured header goes with every
// scrape; a redirect to another host is refused rather than followed with
// it; and no header value or URL credential shows in a marker, an error or
// a sample.
func TestPromHeaderAndCredentials(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-value"
	page := promFixture(t, "vllm_v1_a.prom")
	var elsewhereGot atomic.Value
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhereGot.Store(r.Header.Get("X-Api-Key") + r.Header.Get("Authorization"))
		_, _ = w.Write([]byte(page))
	}))
	t.Cleanup(elsewhere.Close)
	var redirect atomic.Bool
	var gotKey atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotKey.Store(r.Header.Get("X-Api-Key"))
		switch {
		case r.URL.Path == "/moved":
			_, _ = w.Write([]byte(page))
		case redirect.Load():
			http.Redirect(w, r, elsewhere.URL+"/metrics?token="+secret, http.StatusFound)
		default:
			http.Redirect(w, r, "/moved", http.StatusFound) // same host: followed
		}
	}))
	t.Cleanup(srv.Close)
	withCreds := strings.Replace(srv.URL, "http://", "http://user:"+secret+"@", 1) + "/metrics?token=" + secret
	header := http.Header{"X-Api-Key": {secret}}
	r := startProm(t, PromConfig{URL: withCreds, Header: header, Interval: 20 * time.Millisecond, Timeout: promTestTimeout})

	s := r.next("sample", isFreshSample).Server
	if got, _ := gotKey.Load().(string); got != secret {
		t.Errorf("server got X-Api-Key %q, want the configured header", got)
	}
	redirect.Store(true)
	m := r.next("refused redirect", isMarker("metrics scrape failed")).Marker
	if !strings.Contains(m.Message, "redirect to "+elsewhere.URL+" refused") {
		t.Errorf("marker %q does not say the redirect was refused", m.Message)
	}
	stale := r.next("stale sample", isStaleSample).Server
	if got := elsewhereGot.Load(); got != nil {
		t.Errorf("the other host was asked, with headers %q", got)
	}
	for _, text := range []string{m.Message, s.Source, stale.Source, stale.Error} {
		if strings.Contains(text, secret) {
			t.Errorf("a credential shows in %q", text)
		}
	}
	header.Set("X-Api-Key", "changed") // NewProm kept its own copy
	redirect.Store(false)
	r.next("recovery", isMarker("metrics scrape recovered"))
	if got, _ := gotKey.Load().(string); got != secret {
		t.Errorf("after the caller changed its header map, the server got %q", got)
	}

	if _, err := NewProm(PromConfig{URL: srv.URL, Header: http.Header{"X-Key": {"a\r\nInjected: " + secret}}}); err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("header value with a line break: %v, want an error that does not show it", err)
	}
	if _, err := NewProm(PromConfig{URL: "http://user:" + secret + "@host/%zz"}); err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("bad URL with credentials: %v, want an error that does not show them", err)
	}
	if _, err := MetricsURLFor("http://user:" + secret + "@host/%zz"); err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("bad target with credentials: %v, want an error that does not show them", err)
	}
}

// TestPromHTTPClient: the caller's client is used, so its TLS settings hold.
func TestPromHTTPClient(t *testing.T) {
	t.Parallel()
	page := promFixture(t, "tgi_a.prom")
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(page)) }))
	t.Cleanup(srv.Close)
	for _, withClient := range []bool{true, false} {
		cfg := PromConfig{URL: srv.URL + "/metrics", Timeout: promWait, Header: http.Header{"X-Api-Key": {"k"}}}
		if withClient {
			cfg.HTTPClient = srv.Client() // trusts the test server's certificate
		}
		p, err := NewProm(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Scrape(context.Background())
		if withClient && err != nil {
			t.Errorf("with the server's client: %v", err)
		}
		if !withClient && (err == nil || !strings.Contains(err.Error(), "certificate")) {
			t.Errorf("without it: %v, want a certificate error", err)
		}
	}
}

// FuzzPageLimits reads any text through the scrape's page limits: within
// them the parse is exactly ParseProm's; past one it never succeeds, and the
// limit passed is named.
func FuzzPageLimits(f *testing.F) {
	f.Add("a 1\nb 2\n", uint16(2), uint16(100))
	f.Add("a 1\nb 2\n", uint16(1), uint16(100))
	f.Add("# TYPE h histogram\nh_bucket{le=\"1\"} 5\nh_sum 1\nh_count 5\n", uint16(10), uint16(20))
	f.Add(promFamilyChunks(promFixture(f, "vllm_v1_a.prom"), 25)[0], uint16(40), uint16(4000))
	f.Fuzz(func(t *testing.T, text string, maxLines, maxBytes uint16) {
		page := &pageReader{ctx: context.Background(), r: strings.NewReader(text), maxBytes: int64(maxBytes), maxLines: int(maxLines)}
		got, err := parseProm(context.Background(), page)
		over := strings.Count(text, "\n") > int(maxLines) || len(text) > int(maxBytes)
		if over {
			if err == nil {
				t.Fatalf("a page past its limits (%d lines, %d bytes) parsed", maxLines, maxBytes)
			}
			if page.over == "" && page.err != nil {
				t.Fatalf("reader failed with %v without naming a limit", page.err)
			}
			return
		}
		want, wantErr := ParseProm(strings.NewReader(text))
		if (err == nil) != (wantErr == nil) || err == nil && len(got.Families) != len(want.Families) || page.over != "" {
			t.Fatalf("within the limits: %v (%d families, over %q), ParseProm: %v", err, len(got.Families), page.over, wantErr)
		}
	})
}
