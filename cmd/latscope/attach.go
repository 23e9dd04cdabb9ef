package main

import (
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/latscope/latscope/agent"
	"github.com/latscope/latscope/session"
)

func newAttachCmd() *cobra.Command {
	var (
		agentsFile, token, caFile, record string
		noTUI, jsonOut, noColor           bool
		connectTimeout, giveUp            time.Duration
	)
	cmd := &cobra.Command{
		Use:   "attach URL [URL...]",
		Short: "The dashboard for remote agents: watch one or several `latscope agent`s",
		Long: `attach streams the events of one or more agents (latscope agent) and
aggregates them here. Each agent's events are aggregated on the agent's own
timestamps, one timeline per agent. The fleet is every agent's requests
merged into one distribution, exact (never an average of the agents'
percentiles), on this machine's clock: at every connection attach
estimates the agent's clock offset from timestamped pings (NTP-style),
says it, warns above 50 ms, and moves the agent's requests by it. The
dashboard's fleet view (key a) and, with --no-tui, the summary that follows
the agents' are that one fleet. --json prints {"fleet": <summary>,
"agents": {"<name>": <summary>, ...}, "connections": {"<name>": {url,
region, connections, clock_offset_ms, ...}}}.

A dropped connection is retried with backoff and resumed from the last event
received; nothing the agent's replay ring still holds is lost, and anything
older is counted as lost, never silently skipped. An agent that cannot be
reached is said as it happens, with why and when the next try is; one never
reached within --give-up is given up (said, and shown as given up), and an
attach that reached no agent exits 1, naming each and its last error. An
agent whose connection ended and is not back is shown as lost (its figures
greyed, no longer taken for current) while it is retried. Events whose ids
go backwards are dropped as duplicates, said and counted.

With several agents, --record FILE writes one file per agent (FILE with the
agent's name before the extension).`,
		Example: `  latscope attach http://127.0.0.1:7070
  latscope attach https://gpu-1:7070 https://gpu-2:7070 --token "$LATSCOPE_TOKEN" --ca-cert ca.pem
  latscope attach --agents fleet.txt --no-tui --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if token == "" {
				token = os.Getenv(agent.TokenEnv)
			}
			o := session.AttachOptions{URLs: args, AgentsFile: agentsFile, Client: agent.ClientConfig{Token: token, CAFile: caFile, ConnectTimeout: connectTimeout, GiveUp: giveUp},
				Record: record, JSON: jsonOut, NoColor: noColor, Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()}
			if useDashboard(cmd.OutOrStdout(), noTUI) {
				o.Screen = showDashboard
			}
			return session.Attach(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&agentsFile, "agents", "", "a file of agent URLs, one per line (# starts a comment)")
	fl.StringVar(&token, "token", "", "the agents' bearer token (default: $"+agent.TokenEnv+")")
	fl.StringVar(&caFile, "ca-cert", "", "PEM file of certificate authorities to trust for the agents' TLS certificates, besides the system's")
	// --ca was this flag's first name; the other commands call it --ca-cert.
	fl.StringVar(&caFile, "ca", "", "")
	_ = fl.MarkDeprecated("ca", "use --ca-cert")
	fl.StringVar(&record, "record", "", "record what the agents send: one file per agent when there are several, named FILE-<agent name>.ext, and a new file when an agent restarts")
	fl.BoolVar(&noTUI, "no-tui", false, "print a status line per agent, and their summaries at the end")
	fl.BoolVar(&jsonOut, "json", false, "print the summaries as JSON (with --no-tui)")
	fl.BoolVar(&noColor, "no-color", false, "dashboard without colour (also NO_COLOR=1)")
	fl.DurationVar(&connectTimeout, "connect-timeout", 10*time.Second, "limit for each step of a connection to an agent: dial, TLS handshake, response headers")
	fl.DurationVar(&giveUp, "give-up", 30*time.Second, "stop retrying an agent never reached within this; with none reached, attach exits 1")
	return cmd
}
