package agent

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/latscope/latscope/event"
)

// Config configures a Server. Zero fields take the defaults.
type Config struct {
	Listen ListenConfig
	Ring   RingConfig
	// Heartbeat is how long a stream may stay silent before the agent sends
	// a comment, so that proxies keep it open (default 15 s).
	Heartbeat time.Duration
	// WriteTimeout is how long a client may take to accept one batch of
	// frames before it is dropped as dead (default 10 s). A slow client
	// delays only itself: it resumes later, with a gap record if the ring
	// has moved on.
	WriteTimeout time.Duration
	// Now is the agent's clock for the ring's age bound, gap records and
	// uptime (default time.Now). Network deadlines use the real clock.
	Now func() time.Time
	// Logger receives the agent's own log lines (default: discarded).
	Logger *slog.Logger
	// Identity labels the agent's latscope_agent_info series.
	Identity Identity
	// Good, when set, is the goodput's rule (aggregate.GoodRequest): the
	// requests it passes are counted in latscope_requests_good_total.
	Good func(*event.Request) bool
	// MaxClients bounds the event-stream clients served at once (default
	// DefaultMaxClients): each costs a goroutine and a replay of the ring,
	// so a flood of clients with a valid token must not cost unbounded
	// memory. One over it gets 503.
	MaxClients int
}

// The defaults of Config.
const (
	DefaultHeartbeat    = 15 * time.Second
	DefaultWriteTimeout = 10 * time.Second
	DefaultMaxClients   = 64
)

// StreamHeader names the response header that identifies one run of an
// agent. A client sends back the value it saw along with Last-Event-ID; an
// agent that restarted since (and numbers its events from 1 again) then
// starts the client afresh instead of resuming at a meaningless id.
const StreamHeader = "Latscope-Stream"

// Server serves one agent's event stream, its metrics and its health.
// Publish (or Consume) feeds it; it is an http.Handler, and Listen and
// Serve run it on its own address.
type Server struct {
	cfg      Config
	log      *slog.Logger
	auth     bearer
	ring     *ring
	metrics  *metrics
	streamID string
	started  time.Time
	mux      *http.ServeMux
	clients  atomic.Int64
	refusals *refusalLog
	// busy counts clients refused for MaxClients; busyLogged is when the
	// last log line about them was written (unix ns).
	busy, busyLogged atomic.Int64

	// clientGone, when set by a test, hears how each stream ended.
	clientGone func(err error)
}

// New checks cfg (refusing a non-loopback address without a token) and
// returns a Server.
func New(cfg Config) (*Server, error) {
	if err := cfg.Listen.Validate(); err != nil {
		return nil, err
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = DefaultMaxClients
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id) // never fails (crypto/rand panics rather than return an error)
	s := &Server{
		cfg:      cfg,
		log:      cfg.Logger.With("component", "agent"),
		auth:     newBearer(cfg.Listen.Token),
		ring:     newRing(cfg.Ring, cfg.Now),
		streamID: hex.EncodeToString(id),
		started:  cfg.Now(),
	}
	s.refusals = &refusalLog{log: s.log, now: cfg.Now}
	s.metrics = newMetrics(s.ring, func() time.Duration { return s.cfg.Now().Sub(s.started) }, cfg.Identity, cfg.Good)
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("/events", s.serveEvents)
	s.mux.Handle("/metrics", s.authorized("/metrics",
		promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})))
	s.mux.HandleFunc("/healthz", s.serveHealth)
	s.mux.HandleFunc(ClockPath, s.serveClock)
	return s, nil
}

// ServeHTTP serves /events, /metrics and /healthz.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Publish adds ev to the stream and to the metrics. It never waits for a
// client. It is safe for concurrent use; ids follow the order of the calls.
func (s *Server) Publish(ev event.Event) error {
	data, err := event.Marshal(ev)
	if err != nil {
		s.metrics.eventsInvalid.Inc()
		return fmt.Errorf("publish %s event: %w", ev.Kind, err)
	}
	s.metrics.observe(ev)
	s.ring.publish(ev.Kind, data)
	return nil
}

// End says the session is over: clients get every event still due, then
// an end frame, and their streams close. Publish must not be called after.
func (s *Server) End() { s.ring.end() }

// Clients returns the event-stream clients connected now.
func (s *Server) Clients() int { return int(s.clients.Load()) }

// Drain waits, after End, until every client has taken the end frame and
// gone, or ctx ends; it returns the clients still connected. Stopping Serve
// before that would cut their streams short of the end.
func (s *Server) Drain(ctx context.Context) int {
	tick := time.NewTicker(10 * time.Millisecond) // a poll: a shutdown-only wait
	defer tick.Stop()
	for {
		n := s.Clients()
		if n == 0 {
			return 0
		}
		select {
		case <-ctx.Done():
			return n
		case <-tick.C:
		}
	}
}

// Consume publishes every event from events (a pipeline subscription's
// channel) until the channel closes, then calls End. Like every consumer
// of the pipeline it drains until its input closes rather than until a
// context ends, so the records of a Ctrl-C'd session still reach the
// stream. An event that does not encode is logged and counted, and the
// rest go on.
func (s *Server) Consume(events <-chan event.Event) {
	for ev := range events {
		if err := s.Publish(ev); err != nil {
			s.log.Warn("event not published", "err", err)
		}
	}
	s.End()
}

// Listen opens the configured address, with TLS when configured.
func (s *Server) Listen() (net.Listener, error) {
	tlsCfg, err := s.cfg.Listen.tlsConfig()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", s.cfg.Listen.addr())
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if s.cfg.Listen.exposed() && tlsCfg == nil && s.auth.on {
		s.log.Warn("serving without TLS on a non-loopback address: the token crosses the network in clear text",
			"addr", ln.Addr().String())
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	return ln, nil
}

// Serve serves on ln until ctx ends, then ends every stream and returns
// once every connection's handler has returned.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       time.Minute,
		// Request contexts derive from ctx, so every stream ends with it.
		BaseContext: func(net.Listener) context.Context { return context.WithValue(ctx, serveCtxKey{}, ctx) },
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(stopCtx)
	if err != nil {
		err = errors.Join(fmt.Errorf("shut down: %w", err), srv.Close())
	}
	<-served
	s.refusals.flush()
	return err
}

// authorized requires the token on h, counting refusals under path.
func (s *Server) authorized(path string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.allow(w, r, path) {
			return
		}
		h.ServeHTTP(w, r)
	})
}

// allow answers 401 and counts it unless r carries the token.
func (s *Server) allow(w http.ResponseWriter, r *http.Request, path string) bool {
	if s.auth.allows(r) {
		return true
	}
	s.metrics.unauthorized.WithLabelValues(path).Inc()
	s.refusals.refused(path, r.RemoteAddr)
	refuse(w)
	return false
}
