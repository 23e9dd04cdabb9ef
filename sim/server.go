package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultModel is the served model name when Config.Model is empty.
const DefaultModel = "sim-7b"

// Config configures a Server. Zero values pick the defaults noted.
type Config struct {
	Profile          Profile // zero: the h100-7b profile
	MaxNumSeqs       int     // batch slots; 0: the profile's
	MaxBatchedTokens int     // per-step token budget; 0: the profile's
	// TokenizerPool is the number of tokenizer workers; 0 tokenizes on the
	// shared front-end loop, where a long prompt stalls every stream.
	TokenizerPool int
	Model         string // served model name; "": DefaultModel
	Fault         Fault  // faults applied to a fraction FaultRate of requests
	// FaultRate is the fraction of requests Fault applies to, in [0, 1];
	// 0 with a non-zero Fault means every request.
	FaultRate    float64
	OTLPEndpoint string // OTLP/HTTP traces URL; "": no tracing
	Seed         int64  // seeds generated text, EOS points and fault draws

	// OnFrame, if set, is called on the shared loop right after each content
	// frame is flushed. It must return quickly.
	OnFrame func(FrameInfo)
	// OnFinish, if set, is called on the shared loop when a request that
	// reached the engine finishes, completes or is aborted. It must return quickly.
	OnFinish func(Truth)
	Logger   *slog.Logger // nil: discard
}

// Server is a simulated LLM server. Create one with New, serve it with Serve
// or mount Handler, and release it with Close.
type Server struct {
	cfg      Config
	prof     Profile
	log      *slog.Logger
	m        *metrics
	tr       *tracing // nil without an OTLP endpoint
	front    *workers // the shared loop
	tokPool  *workers // nil: tokenize on the shared loop
	eng      *engine
	handler  http.Handler
	idPrefix string
	seq      atomic.Uint64
	// writeEWMA is the recent mean time of one frame's write and flush.
	// Owned by the shared loop.
	writeEWMA time.Duration

	cancel     context.CancelFunc
	engineDone chan struct{}
	draining   chan struct{}
	drainOnce  sync.Once
	closeOnce  sync.Once
	closeErr   error
}

// New validates cfg and starts the server's engine and loop goroutines.
func New(cfg Config) (*Server, error) {
	prof := cfg.Profile
	if prof.Name == "" {
		var err error
		if prof, err = ProfileByName("h100-7b"); err != nil {
			return nil, err
		}
	}
	if cfg.MaxNumSeqs < 0 || cfg.MaxBatchedTokens < 0 || cfg.TokenizerPool < 0 {
		return nil, errors.New("max num seqs, max batched tokens and tokenizer pool must not be negative")
	}
	if cfg.MaxNumSeqs > 0 {
		prof.MaxNumSeqs = cfg.MaxNumSeqs
	}
	if cfg.MaxBatchedTokens > 0 {
		prof.MaxBatchedTokens = cfg.MaxBatchedTokens
	}
	if err := prof.validate(); err != nil {
		return nil, err
	}
	if cfg.FaultRate < 0 || cfg.FaultRate > 1 {
		return nil, fmt.Errorf("fault rate %v: want a fraction in [0, 1]", cfg.FaultRate)
	}
	if cfg.Model == "" {
		cfg.Model = DefaultModel
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Server{
		cfg:        cfg,
		prof:       prof,
		log:        log,
		m:          newMetrics(cfg.Model),
		idPrefix:   fmt.Sprintf("sim%08x", rand.Uint32()),
		engineDone: make(chan struct{}),
		draining:   make(chan struct{}),
	}
	if cfg.OTLPEndpoint != "" {
		tr, err := newTracing(cfg.OTLPEndpoint)
		if err != nil {
			return nil, err
		}
		s.tr = tr
	}
	s.front = newWorkers(1)
	if cfg.TokenizerPool > 0 {
		s.tokPool = newWorkers(cfg.TokenizerPool)
	}
	s.eng = newEngine(prof, prof.MaxNumSeqs, prof.MaxBatchedTokens, s.m, func(ev tokenEvent) {
		s.front.submit(func() { s.onToken(ev) })
	})
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		defer close(s.engineDone)
		s.eng.run(ctx)
	}()
	s.handler = s.routes()
	return s, nil
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Model returns the served model name.
func (s *Server) Model() string { return s.cfg.Model }

// Profile returns the effective profile (with MaxNumSeqs and MaxBatchedTokens applied).
func (s *Server) Profile() Profile { return s.prof }

// Stats returns a snapshot of the engine.
func (s *Server) Stats() Stats { return s.eng.stats(time.Now()) }

// shutdownGrace bounds how long Serve waits for connections to finish.
const shutdownGrace = 5 * time.Second

// Serve serves HTTP on ln until ctx ends, then aborts the requests in flight
// and shuts the HTTP server down. It does not Close the Server.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	s.drain()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	<-errc
	return nil
}

func (s *Server) drain() { s.drainOnce.Do(func() { close(s.draining) }) }

// Close aborts requests in flight, stops the engine and the loops and flushes
// pending spans. It is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.drain()
		s.cancel()
		<-s.engineDone
		s.front.stop()
		if s.tokPool != nil {
			s.tokPool.stop()
		}
		if s.tr != nil {
			ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
			defer cancel()
			s.closeErr = s.tr.shutdown(ctx)
		}
	})
	return s.closeErr
}

// requestRand returns the random source of request number seq: the same
// Seed and sequence give the same draws.
func (s *Server) requestRand(seq uint64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(s.cfg.Seed), seq))
}
