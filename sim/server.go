package sim

import (
	"context"
	"crypto/tls"
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
	// Reasoning makes the chat and Responses streams a reasoning model's:
	// the first Reasoning.Tokens deltas are its thinking.
	Reasoning Reasoning

	// The modes below make the server behave as other servers do. Each is
	// off (vLLM's behaviour) at its zero value.

	// Headers is when a stream's response headers are sent.
	Headers HeaderTiming
	// CloseAfterStream: after a streamed response the connection is dead
	// without saying so (no Connection: close), as llama-server's are: the
	// next request a client sends on it is met by a close, before any
	// response byte. Needs Serve.
	CloseAfterStream bool
	// PrefixCacheBlocks turns on cross-request prefix caching with room for
	// this many blocks of PrefixBlockTokens tokens (least recently used
	// evicted first). A prompt that starts with whole blocks an earlier
	// prompt computed skips their prefill and reports them as
	// usage.prompt_tokens_details.cached_tokens. A prompt's blocks are
	// cached once its prefill completes. 0: off.
	PrefixCacheBlocks int
	// KeepAbandoned keeps generating for a client that went away: the
	// sequence holds its slot and decodes until it finishes, instead of
	// being aborted as vLLM does.
	KeepAbandoned bool
	// NoChunkedPrefill prefills each admitted prompt whole, in a step that
	// decodes nothing, so every decoding stream pauses for it; the default is
	// chunked prefill within MaxBatchedTokens per step, alongside decodes.
	NoChunkedPrefill bool
	// Loading answers every API request, /health included, with 503
	// "Loading model" for this long after New; /metrics still answers.
	Loading time.Duration
	// Nagle turns Nagle's algorithm on for the server's connections and
	// writes each SSE event in two pieces (its lines, then the blank line
	// that ends it), the write pattern that meets a client's delayed ACK.
	// Loopback does not stall on that, so the stall is emulated: a write
	// made while an earlier one is unacknowledged is held back until
	// DelayedACK after it, then released with everything held since. Truth
	// lists the held frames. Needs Serve.
	Nagle bool

	// Background is traffic the simulator sends itself (its "users");
	// off at its zero value.
	Background Background

	// Disagg serves with disaggregated prefill and decode: a prefill pool,
	// a KV-cache link and a decode pool (see Disagg). Off at its zero value.
	Disagg Disagg

	// ServerTiming reports each stream's stages in a W3C Server-Timing
	// header (those done when the headers leave) and trailer (every stage
	// of the first frame), as a server instrumented for it does; vLLM does
	// not. latscope sim and demo turn it on.
	ServerTiming bool

	// H2C serves HTTP/2 without TLS to clients that know it is spoken
	// (prior knowledge), beside HTTP/1.1 on the same port. With a proxy in
	// front (Deployment) the proxy speaks it; the hop behind stays HTTP/1.1.
	H2C bool
	// TLS, when set, serves HTTPS with its certificate, HTTP/2 and HTTP/1.1
	// offered through ALPN (SelfSignedTLS, LoadTLS). As H2C, it is the
	// first hop's.
	TLS *tls.Config

	// OnFrame, if set, is called on the shared loop right after each content
	// frame is flushed. It must return quickly.
	OnFrame func(FrameInfo)
	// OnFinish, if set, is called on the shared loop when a request that
	// reached the engine finishes, completes or is aborted. It must return quickly.
	OnFinish func(Truth)
	Logger   *slog.Logger // nil: discard
}

// HeaderTiming is when a stream's response headers are sent.
type HeaderTiming string

// The header timings.
const (
	// HeadersAtOnce sends them as soon as the request is accepted
	// (tokenized), as vLLM does; the zero value means this too.
	HeadersAtOnce HeaderTiming = "at-once"
	// HeadersSlotted sends them when the request gets a batch slot, as
	// llama-server does, so a client's wait for headers covers the queue.
	HeadersSlotted HeaderTiming = "slotted"
	// HeadersFirstToken sends them with the first token, as llm-d's
	// inference simulator does.
	HeadersFirstToken HeaderTiming = "first-token"
)

// HeaderTimings lists the header timings.
func HeaderTimings() []HeaderTiming {
	return []HeaderTiming{HeadersAtOnce, HeadersSlotted, HeadersFirstToken}
}

// ParseHeaderTiming parses a header timing by name; "" is HeadersAtOnce.
func ParseHeaderTiming(name string) (HeaderTiming, error) {
	if name == "" {
		return HeadersAtOnce, nil
	}
	for _, h := range HeaderTimings() {
		if string(h) == name {
			return h, nil
		}
	}
	return "", fmt.Errorf("unknown header timing %q (want at-once, slotted or first-token)", name)
}

// Server is a simulated LLM server. Create one with New, serve it with Serve
// or mount Handler, and release it with Close.
type Server struct {
	cfg      Config
	prof     Profile
	log      *slog.Logger
	m        *metrics
	tr       *tracing    // nil without an OTLP endpoint
	front    *workers    // the shared loop
	tokPool  *workers    // nil: tokenize on the shared loop
	eng      *engine     // the engine; with Config.Disagg, the first decode worker
	pd       *disaggPool // nil unless Config.Disagg
	handler  http.Handler
	idPrefix string
	seq      atomic.Uint64
	// writeEWMA is the recent mean time of one frame's write and flush.
	// Owned by the shared loop.
	writeEWMA time.Duration
	// proxyReceipts are the simulator's proxy's receipts of response
	// headers, for the truth (Deployment).
	proxyReceipts proxyReceipts
	// phases sums the finished requests' engine phases (BackgroundTruth).
	phases phaseTruth
	// stopBackground ends the background traffic and waits for its
	// requests; a no-op without it.
	stopBackground func()

	cancel     context.CancelFunc
	engineDone chan struct{}
	draining   chan struct{}
	loaded     chan struct{} // closed once Config.Loading has passed
	loadTimer  *time.Timer   // nil without Config.Loading
	drainOnce  sync.Once
	closeOnce  sync.Once
	closeErr   error
}

// Validate checks the simulator's settings, each named as the sim
// command's flag that sets it: New refuses a Config that fails it.
func (c Config) Validate() error {
	var errs []error
	for _, v := range []struct {
		name  string
		value int
	}{{"max-num-seqs", c.MaxNumSeqs}, {"max-num-batched-tokens", c.MaxBatchedTokens}, {"tokenizer-pool", c.TokenizerPool},
		{"prefix-cache-blocks", c.PrefixCacheBlocks}, {"reasoning-tokens", c.Reasoning.Tokens}} {
		if v.value < 0 {
			errs = append(errs, fmt.Errorf("%s %d: want 0 or more", v.name, v.value))
		}
	}
	if c.Loading < 0 {
		errs = append(errs, fmt.Errorf("loading %v: want a duration of 0 or more", c.Loading))
	}
	errs = append(errs, c.Background.validate()...)
	if c.Disagg.Enabled {
		if err := c.Disagg.validate(); err != nil {
			errs = append(errs, err)
		}
		if c.PrefixCacheBlocks > 0 {
			errs = append(errs, errors.New("disagg with prefix-cache-blocks: the disaggregated deployment has no prefix cache"))
		}
	}
	switch {
	case c.FaultRate < 0 || c.FaultRate > 1:
		errs = append(errs, fmt.Errorf("fault-rate %v: want a fraction between 0 and 1", c.FaultRate))
	case c.FaultRate > 0 && c.Fault.IsZero():
		errs = append(errs, fmt.Errorf("fault-rate %v needs a fault to apply", c.FaultRate))
	}
	if err := c.validateFront(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
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
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	headers, err := ParseHeaderTiming(string(cfg.Headers))
	if err != nil {
		return nil, err
	}
	cfg.Headers = headers
	if cfg.MaxNumSeqs > 0 {
		prof.MaxNumSeqs = cfg.MaxNumSeqs
	}
	if cfg.MaxBatchedTokens > 0 {
		prof.MaxBatchedTokens = cfg.MaxBatchedTokens
	}
	if err := prof.validate(); err != nil {
		return nil, err
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
		loaded:     make(chan struct{}),
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
	s.eng = s.newEngine()
	if cfg.Disagg.Enabled {
		decode := []*engine{s.eng}
		for len(decode) < cfg.Disagg.withDefaults().DecodeWorkers {
			decode = append(decode, s.newEngine())
		}
		s.pd = newDisaggPool(cfg.Disagg, prof, s.m, decode)
	}
	if cfg.Loading > 0 {
		s.loadTimer = time.AfterFunc(cfg.Loading, func() { close(s.loaded) })
	} else {
		close(s.loaded)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		defer close(s.engineDone)
		if s.pd != nil {
			s.pd.run(ctx)
			return
		}
		s.eng.run(ctx)
	}()
	s.handler = s.routes()
	s.stopBackground = func() {}
	if cfg.Background.Rate > 0 {
		bctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.runBackground(bctx)
		}()
		s.stopBackground = func() {
			stop()
			<-done
		}
	}
	return s, nil
}

// newEngine builds the engine for s's profile and modes.
func (s *Server) newEngine() *engine {
	e := newEngine(s.prof, s.m, func(ev tokenEvent) {
		s.front.submit(func() { s.onToken(ev) })
	})
	e.wholePrefill = s.cfg.NoChunkedPrefill
	if s.cfg.PrefixCacheBlocks > 0 {
		e.cache = newPrefixCache(s.cfg.PrefixCacheBlocks)
	}
	if s.cfg.Headers == HeadersSlotted {
		e.onSlot = func(r *request) {
			s.front.submit(func() { s.onSlot(r) })
		}
	}
	return e
}

// submit hands a tokenized request to the engine, or with Config.Disagg
// to the prefill pool.
func (s *Server) submit(r *request) {
	if s.pd != nil {
		s.pd.add(r)
		return
	}
	s.eng.add(r)
}

// times returns a copy of r's engine timestamps.
func (s *Server) times(r *request) engineTimes {
	if s.pd != nil {
		return s.pd.timesOf(r)
	}
	return s.eng.times(r)
}

// kick wakes the engines, so that one drops a request aborted.
func (s *Server) kick() {
	if s.pd != nil {
		s.pd.kickAll()
		return
	}
	s.eng.kick()
}

// Ready returns a channel that is closed once the model has "loaded"
// (Config.Loading after New); until then API requests get 503.
func (s *Server) Ready() <-chan struct{} { return s.loaded }

// Handler returns the server's HTTP handler. The connection-level modes
// (Config.CloseAfterStream, Config.Nagle) need Serve.
func (s *Server) Handler() http.Handler { return s.handler }

// Model returns the served model name.
func (s *Server) Model() string { return s.cfg.Model }

// Profile returns the effective profile (with MaxNumSeqs and MaxBatchedTokens applied).
func (s *Server) Profile() Profile { return s.prof }

// Stats returns a snapshot of the engine.
func (s *Server) Stats() Stats { return s.eng.stats(time.Now()) }

// AbandonTruths returns the truth of the latest requests (up to 4,096)
// whose client went away while they held a batch slot: when the client
// went and when the slot was freed, oldest first.
func (s *Server) AbandonTruths() []AbandonTruth { return s.eng.abandonTruths() }

// PrefixCacheTruth returns what the prefix cache has done so far (zero
// without one).
func (s *Server) PrefixCacheTruth() PrefixCacheTruth { return s.eng.prefixCacheTruth() }

// shutdownGrace bounds how long Serve waits for connections to finish.
const shutdownGrace = 5 * time.Second

// Serve serves HTTP on ln until ctx ends, then aborts the requests in flight
// and shuts the HTTP server down. It does not Close the Server. It speaks
// HTTP/2 too where Config.H2C or Config.TLS say so.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return s.serve(ctx, ln, s.cfg.front())
}

// serve is Serve with the client-facing protocols f.
func (s *Server) serve(ctx context.Context, ln net.Listener, f front) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	if s.cfg.CloseAfterStream || s.cfg.Nagle {
		ln = &connListener{Listener: ln, nagle: s.cfg.Nagle}
		srv.ConnContext = connContext
	}
	errc := make(chan error, 1)
	go func() { errc <- f.serve(srv, ln) }()
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
		s.stopBackground()
		s.drain()
		if s.loadTimer != nil {
			s.loadTimer.Stop()
		}
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
