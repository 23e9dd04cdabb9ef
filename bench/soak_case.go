package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/latscope/latscope/agent"
	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/session"
	"github.com/latscope/latscope/tui"
)

// soakAgentRing bounds the soak agent's replay ring: the default, so the
// soak measures the agent as it ships (its whole process within 150 MB). It
// fills before a first checkpoint of a minute, so the checkpoints compare a
// full ring with a full ring.
const soakAgentRing = agent.DefaultRingBytes

// Offscreen dashboard size and frame rate in the dashboard case: the size
// of a large terminal, a few frames a second as the live screen draws.
const (
	soakScreenW, soakScreenH = 200, 50
	soakFrameEvery           = 250 * time.Millisecond
)

// RunSoakCase runs one soak case in this process: the fast server on
// loopback and the pipeline as `run` builds it, measured at each
// checkpoint, each a JSON line on out. It returns after the last one. With
// a profile path, it writes the heap profile there at the last checkpoint,
// and beside it one per checkpoint.
func RunSoakCase(ctx context.Context, out io.Writer, name string, checkpoints []time.Duration, heapReadings int, profile string) error {
	if profile != "" {
		// The default rate (one sample per 512 KiB) leaves a diff between
		// two checkpoints within its noise; a finer one costs some speed,
		// which a diagnostic run can spare.
		runtime.MemProfileRate = 16 << 10
	}
	srv, err := StartSoakServer(name == SoakEndless)
	if err != nil {
		return err
	}
	defer srv.Close()
	c, cleanup, err := soakRun(srv.URL, name)
	if err != nil {
		return err
	}
	defer cleanup()

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	enc := json.NewEncoder(out)
	var encErr error
	measured := make(chan error, 1)
	go func() {
		defer stop() // the last checkpoint ends the run
		n := 0
		measured <- SoakCheckpoints(runCtx, name, time.Now(), checkpoints, heapReadings, srv.Tokens, func(p SoakPoint) {
			if err := enc.Encode(p); err != nil && encErr == nil {
				encErr = fmt.Errorf("soak: write checkpoint: %w", err)
			}
			n++
			if err := checkpointProfile(profile, checkpoints, n); err != nil && encErr == nil {
				encErr = err
			}
		})
	}()
	var runErr error
	switch name {
	case SoakDashboard:
		runErr = soakDashboard(runCtx, c.Session)
	case SoakAgent:
		runErr = soakAgent(runCtx, c.Session)
	default:
		runErr = session.Run(runCtx, io.Discard, io.Discard, c)
	}
	stop()
	mErr := <-measured
	if errors.Is(mErr, context.Canceled) && ctx.Err() == nil {
		// The run ended before the last checkpoint: runErr says why.
		mErr = fmt.Errorf("soak %s: the run ended before its last checkpoint", name)
	}
	// The cancelled context is how the run ends here: being interrupted,
	// even before the run began (a slow machine, tiny checkpoints), is no
	// failure.
	if session.ReasonOf(runErr) == session.Interrupted || errors.Is(runErr, session.ErrSetupInterrupted) {
		runErr = nil
	}
	return errors.Join(mErr, encErr, runErr)
}

// soakRun is the run of soak case name: a few streams of long answers,
// headless, until stopped; the record case records to a temporary file,
// which cleanup removes.
func soakRun(target, name string) (c session.RunConfig, cleanup func(), err error) {
	streams := 4
	if name == SoakEndless {
		streams = 2
	}
	o, err := loopbackOptions(target, streams, 0, SoakOutputTokens, 0, time.Second, 5*time.Minute)
	if err != nil {
		return c, nil, err
	}
	c = session.RunConfig{Session: o}
	cleanup = func() {}
	if name == SoakRecord {
		dir, err := os.MkdirTemp("", "latscope-soak-")
		if err != nil {
			return c, nil, fmt.Errorf("soak: temp dir for the recording: %w", err)
		}
		cleanup = func() { os.RemoveAll(dir) }
		c.Outputs.Record = filepath.Join(dir, "soak.lsr")
	}
	return c, cleanup, nil
}

// checkpointProfile writes a heap profile at checkpoint n (1-based) when
// profile names one: one per checkpoint (CASE@CP.heap), so that what grew
// between two of them shows with pprof -diff_base; the last is also
// CASE.heap.
func checkpointProfile(profile string, checkpoints []time.Duration, n int) error {
	if profile == "" {
		return nil
	}
	at := strings.TrimSuffix(profile, ".heap") + "@" + checkpoints[n-1].String() + ".heap"
	if err := writeHeapProfile(at); err != nil {
		return err
	}
	if n == len(checkpoints) {
		return writeHeapProfile(profile)
	}
	return nil
}

// soakDashboard runs the session as the dashboard does, with the model
// rendered off screen a few times a second instead of by a terminal, and
// the requests view and a waterfall opened now and then.
func soakDashboard(ctx context.Context, o session.Options) error {
	s, err := session.Open(ctx, io.Discard, o)
	if err != nil {
		return err
	}
	defer s.Close()
	m := session.Measurement{
		Pipe: s.PipelineConfig(),
		Agg:  aggregate.Config{Now: time.Now, OfferedRate: s.Offered},
	}
	snaps := pipeline.NewLatest[aggregate.Snapshot]()
	m.Observers = append(m.Observers, snaps.Put)
	feeds := make(chan *tui.LiveFeed, 1)
	m.Consumers = append(m.Consumers, session.DashboardFeed{Snaps: snaps, Feeds: feeds})
	done := make(chan error, 1)
	go func() {
		_, _, err := m.Run(ctx)
		done <- err
	}()
	screen := tui.NewOffscreen(<-feeds, tui.Options{}, soakScreenW, soakScreenH)
	tick := time.NewTicker(soakFrameEvery)
	defer tick.Stop()
	frames := 0
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
		}
		_ = screen.Frame()
		// Every 10 s: the requests list for a second, a waterfall for a second.
		frames++
		switch frames % 40 {
		case 36:
			screen.ToggleView()
		case 38:
			screen.Open()
		case 0:
			screen.Back()
			screen.ToggleView()
		}
	}
}

// soakAgent runs the session as `latscope agent` does, with two clients
// attached to it, reading every event as a dashboard would receive it.
func soakAgent(ctx context.Context, o session.Options) error {
	srv, err := agent.New(agent.Config{
		Listen: agent.ListenConfig{Addr: "127.0.0.1:0"},
		Ring:   agent.RingConfig{MaxBytes: soakAgentRing},
	})
	if err != nil {
		return fmt.Errorf("soak agent: %w", err)
	}
	ln, err := srv.Listen()
	if err != nil {
		return fmt.Errorf("soak agent: listen: %w", err)
	}
	serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServing()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(serveCtx, ln) }()

	s, err := session.Open(ctx, io.Discard, o)
	if err != nil {
		stopServing()
		return errors.Join(err, <-served)
	}
	defer s.Close()
	m := session.Measurement{
		Pipe:      s.PipelineConfig(),
		Agg:       aggregate.Config{Now: time.Now, OfferedRate: s.Offered},
		Consumers: []session.Consumer{session.AgentStream{Server: srv}},
	}
	clientCtx, stopClients := context.WithCancel(ctx)
	defer stopClients()
	clientsDone := make(chan error, 2)
	for range 2 {
		c, err := agent.NewClient(agent.ClientConfig{URL: "http://" + ln.Addr().String()})
		if err != nil {
			stopServing()
			return errors.Join(fmt.Errorf("soak agent: client: %w", err), <-served)
		}
		go func() {
			var events int64
			clientsDone <- c.Run(clientCtx, func(event.Event) { events++ })
		}()
	}
	_, _, runErr := m.Run(ctx)
	stopClients()
	err = errors.Join(runErr, <-clientsDone, <-clientsDone)
	stopServing()
	return errors.Join(err, <-served)
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("soak: heap profile: %w", err)
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("soak: heap profile: %w", err)
	}
	return f.Close()
}
