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
	srv, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = srv.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = srv.Close()
	})
	return "http://" + ln.Addr().String()
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
	srv, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = srv.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Serve(ctx, srv, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = srv.Close()
	})
	return "http://" + ln.Addr().String()
}
