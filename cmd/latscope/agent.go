package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/latscope/latscope/agent"
	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/pipeline"
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
		ssh        sshFlags
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
			sh, err := probe.ParseShard(shard)
			if err != nil {
				return fmt.Errorf("--shard: %w", err)
			}
			if sh.Count > 1 && !f.seed.given {
				return fmt.Errorf("--shard %s: give every agent of the fleet the same --seed, so that their shares make one schedule", sh)
			}
			f.shard = sh
			if startAt != "" {
				if f.startAt, err = time.Parse(time.RFC3339, startAt); err != nil {
					return fmt.Errorf("--start-at %q: want a time such as 2026-12-02T01:30:00Z", startAt)
				}
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
			return runAgent(cmd, target, &f, agent.Config{
				Listen: listen, Ring: agent.RingConfig{MaxEvents: ringSize, MaxAge: ringAge, MaxBytes: ringBytes},
				Logger:     agentLogger(cmd.ErrOrStderr(), quietLogs),
				Identity:   agent.Identity{Name: name, Region: region, Shard: sh.String(), SLO: f.slo},
				Good:       aggregate.GoodRequest(objectives, basis),
				MaxClients: maxClients,
			}, name, linger, &ssh)
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
	ssh.register(fl)
	f.register(fl)
	f.registerHTTP2(fl)
	// The agent runs until stopped unless told otherwise.
	d := fl.Lookup("duration")
	d.Usage = "stop after this long (default: run until stopped, or until --requests)"
	d.DefValue = "0s"
	return cmd
}

func agentLogger(stderr io.Writer, quiet bool) *slog.Logger {
	if quiet {
		return nil
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func runAgent(cmd *cobra.Command, target string, f *loadFlags, cfg agent.Config, name string, linger time.Duration, ssh *sshFlags) error {
	ctx, stderr := cmd.Context(), cmd.ErrOrStderr()
	// The listener first: a refused address or a missing token fails before
	// anything is sent to the server.
	srv, stop, err := startAgentServer(ctx, stderr, cfg)
	if err != nil {
		return err
	}
	defer stop()

	objectives, err := aggregate.ParseSLO(f.slo)
	if err != nil {
		return err
	}
	basis, err := aggregate.ParseTTFTBasis(f.ttftBasis)
	if err != nil {
		return fmt.Errorf("--ttft-basis: %w", err)
	}
	dash, err := ssh.start(ctx, stderr, cfg.Logger, "latscope agent", objectives, f.noColor)
	if err != nil {
		return err
	}
	defer dash.stop()
	s, err := openSession(ctx, stderr, target, f, nil)
	if err != nil {
		return err
	}
	defer s.Close()
	if name != "" {
		s.Header.Name = name
	}
	s.Header.Region = cfg.Identity.Region
	if f.shard.Count > 1 {
		s.Header.Shard = cfg.Identity.Shard
	}
	m := session.Measurement{
		Pipe:      s.PipelineConfig(),
		Agg:       aggregate.Config{Now: time.Now, OfferedRate: s.Offered, SLO: objectives, TTFTBasis: basis},
		Observers: []func(aggregate.Snapshot){session.StatusLine(stderr), dash.observe},
		Consumers: []session.Consumer{agentStream{srv}},
	}
	if err := addRecorderAndExport(ctx, stderr, f, s, &m); err != nil {
		return err
	}
	summary, interrupted, runErr := m.Run(ctx)
	if err := aggregate.WriteTable(cmd.OutOrStdout(), summary); err != nil {
		return fmt.Errorf("write the summary: %w", err)
	}
	if ctx.Err() == nil && linger > 0 {
		fmt.Fprintf(stderr, "latscope agent: session over; serving for %s more (Ctrl-C to stop)\n", linger)
		select {
		case <-time.After(linger):
		case <-ctx.Done():
		}
	}
	return outcome(stderr, summary, objectives, interrupted, runErr)
}

// startAgentServer serves the agent's event stream, /metrics and /healthz.
// However the agent ends (a signal during set-up included), stop gives its
// dashboards the end of the stream before the server stops: a stream
// merely cut makes them reconnect to an agent that is gone.
func startAgentServer(ctx context.Context, stderr io.Writer, cfg agent.Config) (*agent.Server, func(), error) {
	srv, err := agent.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	ln, err := srv.Listen()
	if err != nil {
		return nil, nil, fmt.Errorf("--listen %s: %w", cfg.Listen.Addr, err)
	}
	if cfg.Listen.InsecureNoAuth && cfg.Listen.Token == "" {
		// Every start says it: a flag set once in a unit file is forgotten.
		fmt.Fprintf(stderr, "latscope agent: WARNING: --insecure-no-auth: anyone who can reach %s reads this agent's events, targets and metrics without a token\n", ln.Addr())
	}
	serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(serveCtx, ln) }()
	stop := func() {
		srv.End()
		if n := srv.Clients(); n > 0 {
			fmt.Fprintf(stderr, "latscope agent: waiting up to %s for %d dashboard(s) to take the end of the stream\n", agentDrainTimeout, n)
			drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), agentDrainTimeout)
			if left := srv.Drain(drainCtx); left > 0 {
				fmt.Fprintf(stderr, "latscope agent: %d dashboard(s) still connected; closing their streams\n", left)
			}
			cancel()
		}
		stopServing()
		if err := <-served; err != nil {
			fmt.Fprintf(stderr, "latscope agent: %v\n", err)
		}
	}
	scheme := "http"
	if cfg.Listen.TLSCert != "" {
		scheme = "https"
	}
	fmt.Fprintf(stderr, "latscope agent: serving %s://%s/events, /metrics and /healthz\n", scheme, ln.Addr())
	return srv, stop, nil
}

// agentDrainTimeout bounds the wait for dashboards to take the end of the
// stream when the agent stops.
const agentDrainTimeout = 2 * time.Second

// agentStream feeds the agent's replay ring. Publishing never waits on a
// client, so the subscription can be lossless: the ring itself decides what
// a slow client misses, and tells it.
type agentStream struct{ srv *agent.Server }

func (a agentStream) Start(_ context.Context, fan *pipeline.Fanout) func() error {
	sub := fan.Subscribe("agent", 8192, pipeline.Lossless)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.srv.Consume(sub.Events())
	}()
	return func() error { <-done; return nil }
}
