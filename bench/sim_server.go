package bench

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/latscope/latscope/sim"
)

// SimServer returns a SimStarter that runs latscope's simulator in this
// process, with the named profile, serving model, and with at least
// maxNumSeqs batch slots (so the bench's concurrency is served, not queued),
// on a loopback port. The
// simulator reports each content frame's flush time to the ground truth.
func SimServer(profile, model string, maxNumSeqs int) SimStarter {
	return func(ctx context.Context, truth *GroundTruth) (string, func() error, error) {
		prof, err := sim.ProfileByName(profile)
		if err != nil {
			return "", nil, err
		}
		srv, err := sim.New(sim.Config{
			Profile:    prof,
			Model:      model,
			MaxNumSeqs: max(maxNumSeqs, prof.MaxNumSeqs),
			OnFrame:    func(f sim.FrameInfo) { truth.Record(f.RequestID, f.Index, f.At) },
		})
		if err != nil {
			return "", nil, fmt.Errorf("new simulator: %w", err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			srv.Close()
			return "", nil, fmt.Errorf("listen: %w", err)
		}
		sctx, cancel := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- srv.Serve(sctx, ln) }()
		stop := func() error {
			cancel()
			return errors.Join(<-served, srv.Close())
		}
		return "http://" + ln.Addr().String(), stop, nil
	}
}
