package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/latscope/latscope/agent"
	"github.com/latscope/latscope/aggregate"
)

// AgentConfig is one agent: the session it measures, the server that
// streams it, and what it writes beside.
type AgentConfig struct {
	Session Options
	Outputs Outputs
	Server  agent.Config
	// SLO and TTFTBasis are as the command line gives them.
	SLO, TTFTBasis string
	// Name, when set, names the session; Linger is how long the agent
	// keeps serving after the session ends.
	Name    string
	Linger  time.Duration
	SSH     SSH
	NoColor bool
	// Watch watches the server's own traffic instead of sending the load,
	// with a canary at CanaryRate (the session's load, a steady one).
	Watch      bool
	CanaryRate float64
}

// Agent serves the event stream, measures the session until it ends,
// prints the summary on stdout and returns the run's outcome: the whole of
// `latscope agent` after its flags.
func Agent(ctx context.Context, stdout, stderr io.Writer, c AgentConfig) error {
	cfg, name, linger := c.Server, c.Name, c.Linger
	// The listener first: a refused address or a missing token fails before
	// anything is sent to the server.
	srv, stop, err := startAgentServer(ctx, stderr, cfg)
	if err != nil {
		return err
	}
	defer stop()

	objectives, err := aggregate.ParseSLO(c.SLO)
	if err != nil {
		return err
	}
	basis, err := aggregate.ParseTTFTBasis(c.TTFTBasis)
	if err != nil {
		return fmt.Errorf("--ttft-basis: %w", err)
	}
	dash, err := c.SSH.start(ctx, stderr, cfg.Logger, "latscope agent", objectives, c.NoColor)
	if err != nil {
		return err
	}
	defer dash.stop()
	s, err := c.open(ctx, stderr)
	if err != nil {
		return err
	}
	defer s.Close()
	if name != "" {
		s.Header.Name = name
	}
	s.Header.Region = cfg.Identity.Region
	if c.Session.Load.Shard.Count > 1 {
		s.Header.Shard = cfg.Identity.Shard
	}
	m := Measurement{
		Pipe:      s.PipelineConfig(),
		Agg:       aggregate.Config{Now: time.Now, OfferedRate: s.Offered, SLO: objectives, TTFTBasis: basis},
		Observers: []func(aggregate.Snapshot){c.statusLine(stderr), dash.observe},
		Consumers: []Consumer{AgentStream{Server: srv}},
	}
	if err := c.Outputs.Wire(ctx, stderr, s, &m); err != nil {
		return err
	}
	summary, interrupted, runErr := m.Run(ctx)
	if err := aggregate.WriteTable(stdout, summary); err != nil {
		return fmt.Errorf("write the summary: %w", err)
	}
	if ctx.Err() == nil && linger > 0 {
		fmt.Fprintf(stderr, "latscope agent: session over; serving for %s more (Ctrl-C to stop)\n", linger)
		select {
		case <-time.After(linger):
		case <-ctx.Done():
		}
	}
	return Outcome(stderr, summary, objectives, interrupted, runErr)
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

// open opens the agent's session: a watch (with its canary) or a load.
func (c AgentConfig) open(ctx context.Context, stderr io.Writer) (*Session, error) {
	if !c.Watch {
		if c.CanaryRate != 0 {
			return nil, errors.New("--canary-rate goes with --watch")
		}
		return Open(ctx, stderr, c.Session)
	}
	if err := CheckCanaryRate(c.CanaryRate); err != nil {
		return nil, err
	}
	return WatchConfig{Session: c.Session, CanaryRate: c.CanaryRate, Duration: c.Session.Load.Duration}.open(ctx, stderr)
}

// statusLine is the agent's status line: the watch's, or the run's.
func (c AgentConfig) statusLine(stderr io.Writer) func(aggregate.Snapshot) {
	if c.Watch {
		return watchStatusLine(stderr, statusEvery(stderr))
	}
	return StatusLine(stderr, statusEvery(stderr))
}

// AgentLogger logs the agent's connections on stderr; nil when quiet.
func AgentLogger(stderr io.Writer, quiet bool) *slog.Logger {
	if quiet {
		return nil
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}
