package session

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/sshserve"
	"github.com/latscope/latscope/tui"
)

// SSH serves the live dashboard over SSH: anyone whose public key is in
// AuthorizedKeys gets a read-only view of their own (--ssh and its
// companions). The zero Addr serves none.
type SSH struct {
	Addr, AuthorizedKeys, HostKey string
	MaxSessions                   int
	Refresh                       time.Duration
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
func (f SSH) start(ctx context.Context, stderr io.Writer, logger *slog.Logger, who string, objectives []aggregate.Objective, noColor bool) (sshDashboard, error) {
	if f.Refresh < 100*time.Millisecond {
		return sshDashboard{}, fmt.Errorf("--ssh-refresh %s: want at least 100ms", f.Refresh)
	}
	if f.Addr == "" {
		if f.AuthorizedKeys != "" || f.HostKey != "" {
			return sshDashboard{}, fmt.Errorf("--ssh-authorized-keys and --ssh-host-key go with --ssh ADDR, which is not given")
		}
		return sshDashboard{observe: func(aggregate.Snapshot) {}, stop: func() {}}, nil
	}
	snaps := pipeline.NewLatest[aggregate.Snapshot]()
	srv, err := sshserve.New(sshserve.Config{
		Addr: f.Addr, AuthorizedKeys: f.AuthorizedKeys, HostKey: f.HostKey, MaxSessions: f.MaxSessions,
		Feed:      tui.NewLiveFeed(snaps),
		Dashboard: tui.Options{Objectives: objectives, NoColor: noColor, Refresh: f.Refresh},
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
		made = ", new in " + f.HostKey
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
