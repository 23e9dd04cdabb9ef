package main

import (
	"github.com/latscope/latscope/session"
	"github.com/latscope/latscope/sshserve"
	"github.com/spf13/pflag"
)

// registerSSHFlags adds --ssh and its companions: the live dashboard
// served over SSH (session.SSH).
func registerSSHFlags(fl *pflag.FlagSet, f *session.SSH) {
	fl.StringVar(&f.Addr, "ssh", "", "also serve the live dashboard over SSH on this address, e.g. 127.0.0.1:2222: anyone whose public key is in --ssh-authorized-keys runs ssh -p 2222 host (read-only, a view of their own)")
	fl.StringVar(&f.AuthorizedKeys, "ssh-authorized-keys", "", "with --ssh: the public keys let in, one a line as in ~/.ssh/authorized_keys (public-key login only)")
	fl.StringVar(&f.HostKey, "ssh-host-key", "", "with --ssh: the server's private key file, required; an Ed25519 key is made there (mode 0600) when there is none, and kept for the next start")
	fl.IntVar(&f.MaxSessions, "ssh-max-sessions", sshserve.DefaultMaxSessions, "with --ssh: most dashboards served at once; one more is told so and closed")
	fl.DurationVar(&f.Refresh, "ssh-refresh", sshserve.DefaultRefresh, "with --ssh: how often each remote dashboard takes new figures (a key redraws it at once); each costs this process about 10 ms of CPU per redraw of its charts")
}
