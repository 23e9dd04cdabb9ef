package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/latscope/latscope/agent"
	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/session"
)

// agentLong is `latscope agent --help`'s text.
const agentLong = `agent runs the probe and the collectors beside an inference server (where
NVML and the metrics endpoint are) and serves what it measures:

  /events   the event stream as server-sent events, resumable with Last-Event-ID
            from a bounded replay ring; a client that missed more than the ring
            holds gets a record of exactly how many events it missed
  /metrics  latscope's own statistics for Prometheus (stage, TTFT, ITL, E2E
            histograms, requests by outcome), so a fleet can be watched in Grafana
  /healthz  liveness, open without a token; its counters only with the token

It listens on 127.0.0.1:7070 unless told otherwise; any other address needs
--token (or LATSCOPE_TOKEN), or --insecure-no-auth on purpose. With neither
--duration nor --requests it measures until stopped.

`

func newAgentCmd() *cobra.Command {
	var (
		f          loadFlags
		target     string
		listen     agent.ListenConfig
		name       string
		region     string
		shard      string
		startAt    string
		ringSize   int
		ringAge    time.Duration
		ringBytes  int64
		linger     time.Duration
		maxClients int
		quietLogs  bool
		ssh        session.SSH
		watch      bool
		canaryRate float64
	)
	cmd := &cobra.Command{
		Use:   "agent --url URL",
		Short: "Measure headless beside the server and stream the events to remote dashboards (latscope attach)",
		Long:  agentLong,
		Example: `  latscope agent --url http://127.0.0.1:8000 -c 8 --name us-east-1
  LATSCOPE_TOKEN=$(openssl rand -hex 16) latscope agent --url http://vllm:8000 --listen 0.0.0.0:7070 --rate 5
  latscope agent --url http://vllm:8000 --listen 0.0.0.0:7070 --tls-cert agent.crt --tls-key agent.key --token "$T"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if target == "" {
				return fmt.Errorf("--url is required: the inference server to measure, e.g. --url http://127.0.0.1:8000")
			}
			if listen.Token == "" {
				listen.Token = os.Getenv(agent.TokenEnv)
			}
			f.untilStopped, f.noTUI = true, true
			if err := f.fleetShare(shard, startAt); err != nil {
				return err
			}
			if name == "" {
				name, _ = os.Hostname()
			}
			objectives, err := aggregate.ParseSLO(f.slo)
			if err != nil {
				return err
			}
			basis, err := aggregate.ParseTTFTBasis(f.ttftBasis)
			if err != nil {
				return fmt.Errorf("--ttft-basis: %w", err)
			}
			if err := session.CheckCanaryRate(canaryRate); err != nil {
				return err
			}
			if watch { // the server's own traffic, with a steady canary at most
				f.rate, f.arrival, f.drain = canaryRate, probe.ArrivalConstant, 5*time.Second
			}
			o, err := f.sessionOptions(cmd.ErrOrStderr(), target)
			if err != nil {
				return err
			}
			return session.Agent(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), session.AgentConfig{
				Session: o, Outputs: f.outputs(), SLO: f.slo, TTFTBasis: f.ttftBasis, Name: name, Linger: linger, SSH: ssh, NoColor: f.noColor, Watch: watch, CanaryRate: canaryRate,
				Server: agent.Config{
					Listen: listen, Ring: agent.RingConfig{MaxEvents: ringSize, MaxAge: ringAge, MaxBytes: ringBytes},
					Logger:     session.AgentLogger(cmd.ErrOrStderr(), quietLogs),
					Identity:   agent.Identity{Name: name, Region: region, Shard: f.shard.String(), SLO: f.slo},
					Good:       aggregate.GoodRequest(objectives, basis),
					MaxClients: maxClients,
				},
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&target, "url", "", "the server's base URL, e.g. http://127.0.0.1:8000")
	fl.StringVar(&listen.Addr, "listen", agent.DefaultListen, "address to serve /events, /metrics and /healthz on")
	fl.StringVar(&listen.Token, "token", "", "bearer token clients must send (default: $"+agent.TokenEnv+"); required on a non-loopback address")
	fl.BoolVar(&listen.InsecureNoAuth, "insecure-no-auth", false, "serve a non-loopback address without a token, on purpose")
	fl.StringVar(&listen.TLSCert, "tls-cert", "", "serve HTTPS with this certificate (PEM)")
	fl.StringVar(&listen.TLSKey, "tls-key", "", "the certificate's private key (PEM)")
	fl.StringVar(&name, "name", "", "this agent's name on dashboards (default: the host name)")
	fl.StringVar(&region, "region", "", "where this agent measures from (a zone or region), on its latscope_agent_info series")
	fl.StringVar(&startAt, "start-at", "", "begin the load at this time (RFC 3339, e.g. 2026-12-02T01:30:00Z), so a fleet's shards send one schedule together; a time already past starts at once")
	fl.StringVar(&shard, "shard", "", "i/N: send the i-th of N shares (0-based) of a fleet's load; every agent of the fleet gets the same load flags and --seed")
	fl.IntVar(&ringSize, "ring-events", 0, "events kept for clients that reconnect (default 10000)")
	fl.DurationVar(&ringAge, "ring-age", 0, "how long events are kept for clients that reconnect (default 10m)")
	fl.Int64Var(&ringBytes, "ring-bytes", 0, fmt.Sprintf("the most bytes of encoded events kept for clients that reconnect (default %d, 32 MiB); the ring is most of an agent's memory, so raising it raises the agent's resident set by as much", agent.DefaultRingBytes))
	fl.IntVar(&maxClients, "max-clients", agent.DefaultMaxClients, "most event-stream clients served at once; one more gets 503")
	fl.DurationVar(&linger, "linger", time.Minute, "after the session ends, keep serving this long so dashboards can fetch the rest")
	fl.BoolVar(&quietLogs, "quiet", false, "do not log the agent's connections on stderr")
	registerSSHFlags(fl, &ssh)
	fl.BoolVar(&watch, "watch", false, "watch the server's own traffic, as latscope watch does, instead of sending a load (attach shows the watch view)")
	fl.Float64Var(&canaryRate, "canary-rate", 0, "with --watch: send a steady canary of this many requests/s beside the server's own traffic (0: none)")
	f.register(fl)
	f.registerHTTP2(fl)
	// The agent runs until stopped unless told otherwise.
	d := fl.Lookup("duration")
	d.Usage = "stop after this long (default: run until stopped, or until --requests)"
	d.DefValue = "0s"
	return cmd
}

// fleetShare reads --shard and --start-at: this agent's share of a fleet's
// load, and when the fleet's shards begin together.
func (f *loadFlags) fleetShare(shard, startAt string) error {
	sh, err := probe.ParseShard(shard)
	if err != nil {
		return fmt.Errorf("--shard: %w", err)
	}
	if sh.Count > 1 && !f.seed.Given() {
		return fmt.Errorf("--shard %s: give every agent of the fleet the same --seed, so that their shares make one schedule", sh)
	}
	f.shard = sh
	if startAt != "" {
		if f.startAt, err = time.Parse(time.RFC3339, startAt); err != nil {
			return fmt.Errorf("--start-at %q: want a time such as 2026-12-02T01:30:00Z", startAt)
		}
	}
	return nil
}
