package sim

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// DefaultProxyCost is the nominal cost of the proxy's own work on one
// request before it forwards it (accepting, parsing, choosing the
// upstream), as an nginx in front of a model server costs: with the
// forwarding itself the hop comes to a few tenths of a millisecond.
const DefaultProxyCost = 250 * time.Microsecond

// maxProxyPart bounds a proxy start the server believes: a header from
// anywhere else (or another clock) is not the proxy's.
const maxProxyPart = 10 * time.Second

// ProxyConfig configures a Proxy.
type ProxyConfig struct {
	// Upstream is the server's base URL, e.g. http://127.0.0.1:8001.
	Upstream string
	// Cost is the nominal cost of the proxy's own work per request; 0
	// means DefaultProxyCost, a negative value none.
	Cost   time.Duration
	Logger *slog.Logger // nil: discard

	// H2C and TLS are the protocols the proxy speaks to its clients, as
	// Config's; its upstream is HTTP/1.1 whatever they are, as nginx's is.
	H2C bool
	TLS *tls.Config
}

// Proxy is an nginx-like hop in front of a Server: its own accept and
// request parsing, its own (kept-alive) upstream connections, streams
// relayed frame by frame, trailers passed on. It adds a Server-Timing
// metric `proxy`: from taking the request to the upstream's response
// headers, the upstream's own time included, as nginx reports
// $upstream_header_time.
type Proxy struct {
	// onHeaders, when set, is told when the proxy received a response's
	// headers, by its request id: the server behind it puts the return leg
	// in its truth (Deployment wires it).
	onHeaders func(id string, at time.Time)
	rp        *httputil.ReverseProxy
	cost      time.Duration
	log       *slog.Logger
	handler   http.Handler
	front     front
}

// proxyStartKey is the request-context key of when the proxy took it.
type proxyStartKey struct{}

// NewProxy validates cfg and returns a Proxy.
func NewProxy(cfg ProxyConfig) (*Proxy, error) {
	u, err := url.Parse(cfg.Upstream)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("proxy upstream %q: want http://host:port", cfg.Upstream)
	}
	cost := cfg.Cost
	switch {
	case cost == 0:
		cost = DefaultProxyCost
	case cost < 0:
		cost = 0
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	if err := (Config{H2C: cfg.H2C, TLS: cfg.TLS}).validateFront(); err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	p := &Proxy{cost: cost, log: log, front: front{h2c: cfg.H2C, tls: cfg.TLS}}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host
			if start, ok := pr.In.Context().Value(proxyStartKey{}).(time.Time); ok {
				pr.Out.Header.Set(ProxyStartHeader, strconv.FormatInt(start.UnixNano(), 10))
			}
		},
		Transport:     tr,
		FlushInterval: -1, // relay every frame at once
		ModifyResponse: func(resp *http.Response) error {
			now := time.Now()
			if start, ok := resp.Request.Context().Value(proxyStartKey{}).(time.Time); ok {
				resp.Header.Add(ServerTimingHeader, msMetric("proxy", now.Sub(start).Microseconds()))
			}
			if id := resp.Header.Get(RequestIDHeader); id != "" && p.onHeaders != nil {
				p.onHeaders(id, now)
			}
			return nil
		},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			if !errors.Is(err, context.Canceled) {
				log.Debug("proxy upstream", "err", err)
			}
			writeError(w, statusError(http.StatusBadGateway, "proxy: upstream unavailable"))
		},
	}
	p.handler = http.HandlerFunc(p.serve)
	return p, nil
}

// Handler returns the proxy's HTTP handler.
func (p *Proxy) Handler() http.Handler { return p.handler }

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	// A client-sent start is not the proxy's.
	r.Header.Del(ProxyStartHeader)
	// The request body is read whole before it is forwarded, as nginx
	// buffers it by default. Streamed through instead, the upstream
	// transport reads it once more for its end after the upstream already
	// answered; by then the response's first write has closed it for
	// HTTP/1, the read fails, and the transport drops the upstream
	// connection mid-stream: a 200 with no body reached the client.
	body, apiErr := readBody(w, r)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	pauseFrom(start, p.cost)
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), proxyStartKey{}, start)))
}

// Serve serves the proxy on ln until ctx ends, then shuts it down.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           p.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- p.front.serve(srv, ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("proxy on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	<-errc
	p.rp.Transport.(*http.Transport).CloseIdleConnections()
	return nil
}

// maxProxyReceipts bounds the receipts a server keeps for requests that
// have not finished; past it they are forgotten (their truth then holds
// the proxy's forward leg alone).
const maxProxyReceipts = 4096

// proxyReceipts are when the proxy in front received each request's
// response headers, until the request's truth takes them.
type proxyReceipts struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (p *proxyReceipts) note(id string, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.at == nil || len(p.at) >= maxProxyReceipts {
		p.at = make(map[string]time.Time)
	}
	p.at[id] = at
}

func (p *proxyReceipts) take(id string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.at[id]
	delete(p.at, id)
	return at, ok
}
