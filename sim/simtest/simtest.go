// Package simtest serves latscope's simulator on a loopback port for the
// tests of the packages that measure it.
package simtest

import (
	"context"
	"net"
	"testing"

	"github.com/latscope/latscope/sim"
)

// Serve runs a simulator with cfg on a loopback port until the test ends
// (then it stops serving and closes) and returns its base URL.
func Serve(t testing.TB, cfg sim.Config) string {
	t.Helper()
	return serve(t, cfg, func(ctx context.Context, srv *sim.Server, ln net.Listener) error { return srv.Serve(ctx, ln) }, nil)
}

// ServeServer is Serve that also returns the simulator, for its truths.
func ServeServer(t testing.TB, cfg sim.Config) (string, *sim.Server) {
	t.Helper()
	var got *sim.Server
	url := serve(t, cfg, func(ctx context.Context, srv *sim.Server, ln net.Listener) error { return srv.Serve(ctx, ln) }, &got)
	return url, got
}

// ServeTiny is Serve with the fast "tiny" profile in place of cfg's.
func ServeTiny(t testing.TB, cfg sim.Config) string {
	t.Helper()
	prof, err := sim.ProfileByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Profile = prof
	return Serve(t, cfg)
}

// ServeDeployed is Serve with the server deployed as d says: behind its
// proxy hop, at its network distance. It returns the URL clients use.
func ServeDeployed(t testing.TB, cfg sim.Config, d sim.Deployment) string {
	t.Helper()
	return serve(t, cfg, d.Serve, nil)
}

// serve makes the simulator, listens on loopback and runs run until the
// test ends; the server goes to *out when out is not nil.
func serve(t testing.TB, cfg sim.Config, run func(context.Context, *sim.Server, net.Listener) error, out **sim.Server) string {
	t.Helper()
	srv, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil {
		*out = srv
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = srv.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = run(ctx, srv, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = srv.Close()
	})
	return cfg.Scheme() + "://" + ln.Addr().String()
}
