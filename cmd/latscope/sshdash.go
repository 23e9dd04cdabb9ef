package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/spf13/pflag"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/sshserve"
	"github.com/latscope/latscope/tui"
)

// sshFlags serve the live dashboard over SSH (--ssh and its companions).
type sshFlags struct {
	addr, authorizedKeys, hostKey string
	maxSessions                   int
	refresh                       time.Duration
}

func (f *sshFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.addr, "ssh", "", "also serve the live dashboard over SSH on this address, e.g. 127.0.0.1:2222: anyone whose public key is in --ssh-authorized-keys runs ssh -p 2222 host (read-only, a view of their own)")
	fl.StringVar(&f.authorizedKeys, "ssh-authorized-keys", "", "with --ssh: the public keys let in, one a line as in ~/.ssh/authorized_keys (public-key login only)")
	fl.StringVar(&f.hostKey, "ssh-host-key", "", "with --ssh: the server's private key file, required; an Ed25519 key is made there (mode 0600) when there is none, and kept for the next start")
	fl.IntVar(&f.maxSessions, "ssh-max-sessions", sshserve.DefaultMaxSessions, "with --ssh: most dashboards served at once; one more is told so and closed")
	fl.DurationVar(&f.refresh, "ssh-refresh", sshserve.DefaultRefresh, "with --ssh: how often each remote dashboard takes new figures (a key redraws it at once); each costs this process about 10 ms of CPU per redraw of its charts")
}

// sshDashboard is the SSH server of a running command: observe feeds it
// the aggregator's snapshots, stop ends its sessions and waits for them.
type sshDashboard struct {
	observe func(aggregate.Snapshot)
	stop    func()
}

// start serves the dashboard over SSH when --ssh is given (else it
// returns a dashboard whose observe and stop do nothing). who names the
// command on stderr ("latscope agent").
func (f *sshFlags) start(ctx context.Context, stderr io.Writer, logger *slog.Logger, who string, objectives []aggregate.Objective, noColor bool) (sshDashboard, error) {
	if f.refresh < 100*time.Millisecond {
		return sshDashboard{}, fmt.Errorf("--ssh-refresh %s: want at least 100ms", f.refresh)
	}
	if f.addr == "" {
		if f.authorizedKeys != "" || f.hostKey != "" {
			return sshDashboard{}, fmt.Errorf("--ssh-authorized-keys and --ssh-host-key go with --ssh ADDR, which is not given")
		}
		return sshDashboard{observe: func(aggregate.Snapshot) {}, stop: func() {}}, nil
	}
	snaps := pipeline.NewLatest[aggregate.Snapshot]()
	srv, err := sshserve.New(sshserve.Config{
		Addr: f.addr, AuthorizedKeys: f.authorizedKeys, HostKey: f.hostKey, MaxSessions: f.maxSessions,
		Feed:      tui.NewLiveFeed(snaps),
		Dashboard: tui.Options{Objectives: objectives, NoColor: noColor, Refresh: f.refresh},
		Ended:     who + ": stopped; this dashboard ends here",
		Logger:    logger,
	})
	if err != nil {
		return sshDashboard{}, err
	}
	ln, err := srv.Listen()
	if err != nil {
		return sshDashboard{}, err
	}
	made := ""
	if srv.NewKey {
		made = ", new in " + f.hostKey
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	fmt.Fprintf(stderr, "%s: dashboard over ssh on %s: ssh -p %s HOST (host key %s%s)\n", who, ln.Addr(), port, srv.Fingerprint(), made)
	serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(serveCtx, ln) }()
	return sshDashboard{observe: snaps.Put, stop: func() {
		stopServing()
		if err := <-served; err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", who, err)
		}
	}}, nil
}
