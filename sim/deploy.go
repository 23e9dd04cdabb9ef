package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// Deployment is how a Server meets its clients, as a typical deployment
// does: by default behind an nginx-like proxy hop (Proxy), at a network
// distance (Network) from them.
type Deployment struct {
	NoProxy   bool          // clients reach the server directly
	ProxyCost time.Duration // the proxy's own cost per request; 0: DefaultProxyCost
	Network   Network       // between the clients and the first hop
}

// Describe says in words what clients meet, for a start line.
func (d Deployment) Describe() string {
	hop := "behind a proxy hop (Server-Timing: proxy)"
	if d.NoProxy {
		hop = "no proxy"
	}
	net := fmt.Sprintf("network RTT %v", d.Network.RTT)
	if d.Network.Jitter > 0 {
		net += fmt.Sprintf(" ±%v per direction", d.Network.Jitter)
	}
	return hop + ", " + net + " (emulated; the TCP handshake is not delayed)"
}

// Serve serves srv to the clients that connect to ln until ctx ends. With
// a proxy the server listens on a loopback port of its own, and the proxy
// on ln. It does not Close srv.
func (d Deployment) Serve(ctx context.Context, srv *Server, ln net.Listener) error {
	if err := d.Network.Validate(); err != nil {
		_ = ln.Close()
		return err
	}
	ln = d.Network.Listener(ln)
	if d.NoProxy {
		return srv.Serve(ctx, ln)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("listen for the server behind the proxy: %w", err)
	}
	f := srv.cfg.front()
	p, err := NewProxy(ProxyConfig{Upstream: "http://" + inner.Addr().String(), Cost: d.ProxyCost, Logger: srv.log,
		H2C: f.h2c, TLS: f.tls})
	if err != nil {
		_ = ln.Close()
		_ = inner.Close()
		return err
	}
	p.onHeaders = srv.proxyReceipts.note
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	serverErr := make(chan error, 1)
	go func() {
		serverErr <- srv.serve(ctx, inner, front{}) // the hop behind the proxy: HTTP/1.1
		cancel()                                    // no server: the proxy has nothing to serve
	}()
	proxyErr := p.Serve(ctx, ln)
	cancel()
	return errors.Join(proxyErr, <-serverErr)
}
