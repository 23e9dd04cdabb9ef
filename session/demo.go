package session

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/latscope/latscope/collector"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/sim"
)

// DemoServer is the demo's simulated server, in this process: a simulator
// of a profile behind its deployment (proxy hop, emulated network), its
// spans sent to a receiver of the session's, its GPU simulated from its
// load.
type DemoServer struct {
	Profile                   string
	MaxNumSeqs, TokenizerPool int
	Seed                      int64
	Deploy                    sim.Deployment
	PrefixCacheTokens         int
	KeepAbandoned             bool
	GPUInterval               time.Duration
}

// Start serves the simulator on a loopback port: target is its URL, extras
// the session's simulated GPU, span receiver and label; stop stops it.
func (d DemoServer) Start(ctx context.Context) (target string, extras *Extras, stop func(), err error) {
	prof, err := sim.ProfileByName(d.Profile)
	if err != nil {
		return "", nil, nil, fmt.Errorf("--profile: %w", err)
	}
	// The span receiver's port first, so the simulator can be told where to
	// send; the receiver runs as one of the session's sources.
	otlpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, nil, fmt.Errorf("listen for spans: %w", err)
	}
	recv := collector.NewOTLPReceiver(collector.OTLPConfig{Listener: otlpLn})

	blocks, err := sim.PrefixCacheBlocks(0, d.PrefixCacheTokens)
	if err != nil {
		otlpLn.Close()
		return "", nil, nil, err
	}
	srv, err := sim.New(sim.Config{
		Profile: prof, MaxNumSeqs: d.MaxNumSeqs, TokenizerPool: d.TokenizerPool, Seed: d.Seed, ServerTiming: true,
		OTLPEndpoint:      "http://" + otlpLn.Addr().String() + "/v1/traces",
		PrefixCacheBlocks: blocks, KeepAbandoned: d.KeepAbandoned,
	})
	if err != nil {
		otlpLn.Close()
		return "", nil, nil, err
	}
	deploy := d.Deploy
	deploy.Network.Seed = d.Seed
	if err := deploy.Network.Validate(); err != nil {
		otlpLn.Close()
		_ = srv.Close()
		return "", nil, nil, fmt.Errorf("--rtt, --jitter: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		otlpLn.Close()
		_ = srv.Close()
		return "", nil, nil, fmt.Errorf("listen for the simulator: %w", err)
	}
	serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = deploy.Serve(serveCtx, srv, ln)
	}()
	stop = func() {
		stopServing()
		<-served
		_ = srv.Close()
	}

	gpu := collector.NewSimulatedGPU(collector.GPUConfig{Interval: d.GPUInterval}, func() collector.SimLoad {
		st := srv.Stats()
		return collector.SimLoad{BusyFraction: st.Busy, BatchSize: st.BatchSize, KVUsage: st.KVUsage}
	})
	label := fmt.Sprintf("latscope demo: SIMULATED %s server on http://%s (%d slots; %s) - numbers describe the simulator, not a real model; GPU is simulated too",
		prof.Name, ln.Addr(), d.MaxNumSeqs, deploy.Describe())
	extras = &Extras{Collectors: []pipeline.Source{gpu}, Spans: recv, Label: label, Simulated: true}
	return "http://" + ln.Addr().String(), extras, stop, nil
}
