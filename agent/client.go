package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/internal/fileread"
	"github.com/latscope/latscope/internal/textsafe"
	"github.com/latscope/latscope/pipeline"
)

// ClientConfig configures an attach client. Zero fields take the defaults.
type ClientConfig struct {
	// URL is the agent's address ("http://host:7070", "https://host:7070")
	// or its events URL; without a scheme, http is assumed.
	URL string
	// Token is sent as "Authorization: Bearer <token>".
	Token string
	// CAFile is a PEM file of the certificate authorities to trust for the
	// agent's TLS certificate, instead of the system's.
	CAFile string
	// MaxEventBytes bounds one event (default event.MaxLineBytes).
	MaxEventBytes int
	// Backoff paces reconnections.
	Backoff Backoff
	// IdleTimeout ends a connection on which nothing, not even the agent's
	// heartbeat, arrived for this long (default 3 × DefaultHeartbeat).
	IdleTimeout time.Duration
	// ConnectTimeout bounds each connection's dial, TLS handshake and wait
	// for the response's headers, each (default 10 s, the headers 15 s).
	ConnectTimeout time.Duration
	// ClockPings, when above 0, has the client estimate the agent's clock
	// offset at the start of every connection, before its events are
	// emitted, with this many pings (see EstimateClockOffset): an agent
	// that reconnects may have had its clock stepped, or be another host.
	ClockPings int
	// Now is the local clock of those estimates (default time.Now).
	Now func() time.Time
	// GiveUp, when above 0, is how long the client tries to reach an agent
	// it never reached: past it, Run stops retrying and returns nil with
	// the state GaveUp and the last connection error. An agent reached
	// once is retried until ctx ends: it may be restarting.
	GiveUp time.Duration
	// OnState, when set, is called from Run's goroutine with the new status
	// at every change of state. It must not block.
	OnState func(Status)
	Logger  *slog.Logger
}

// Client is a pipeline.Source that attaches to one agent: it streams the
// agent's events and emits them unchanged, reconnecting as needed. Several
// agents are several Clients.
//
// Clocks: every event keeps the agent's timestamps. The client never
// shifts them, never stamps an event with the local clock and invents
// only one kind of event, a Loss record for events it dropped because
// their ids went backwards, dated with the agent's last event; a consumer
// aggregates each agent on that agent's own timeline and never mixes it
// with another's or with the local clock. With ClockPings it estimates
// how far the agent's clock is from the local one at every connection,
// before that connection's events (ClockOffset), for a consumer that puts
// several agents on one timeline (package fleet); it still shifts nothing.
//
// Across reconnections the client resumes after the last event it emitted,
// so it emits every event the agent's ring still holds exactly once; what
// the ring no longer holds arrives as the agent's Loss record.
type Client struct {
	cfg     ClientConfig
	url     string // the events URL
	display string // url without credentials, for errors and the screen
	http    *http.Client
	log     *slog.Logger
	running atomic.Bool

	// Resume point; Run's goroutine only.
	lastID   uint64
	hasID    bool
	run      string    // the agent run's StreamHeader value
	lastTime time.Time // the last emitted event's own time, to date the client's Loss records

	mu    sync.Mutex
	st    Status
	named bool // a session header named the agent
}

var _ pipeline.Source = (*Client)(nil)

// Errors a client ends with.
var (
	// ErrUnauthorized: the agent refused the token (or its absence).
	ErrUnauthorized = errors.New("the agent refused the token")
	// ErrProtocol: the stream is not a latscope agent's, or cannot be read.
	ErrProtocol = errors.New("not a readable latscope event stream")
	// ErrUntrusted: the agent's TLS certificate does not verify (see CAFile).
	ErrUntrusted = errors.New("the agent's certificate is not trusted")
)

// errEnded says the agent's session is over.
var errEnded = errors.New("the agent's session ended")

// NewClient checks cfg and returns a Client.
func NewClient(cfg ClientConfig) (*Client, error) {
	eventsURL, u, err := eventsURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	if cfg.MaxEventBytes <= 0 {
		cfg.MaxEventBytes = event.MaxLineBytes
	}
	if cfg.Backoff.Initial <= 0 {
		cfg.Backoff.Initial = 250 * time.Millisecond
	}
	if cfg.Backoff.Max < cfg.Backoff.Initial {
		cfg.Backoff.Max = max(15*time.Second, cfg.Backoff.Initial)
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 3 * DefaultHeartbeat
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	tlsCfg, err := clientTLS(cfg.CAFile)
	if err != nil {
		return nil, err
	}
	dial, headers := 10*time.Second, 15*time.Second
	if cfg.ConnectTimeout > 0 {
		dial, headers = cfg.ConnectTimeout, cfg.ConnectTimeout
	}
	display := event.RedactURL(eventsURL)
	c := &Client{
		cfg:     cfg,
		url:     eventsURL,
		display: display,
		http: &http.Client{Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: dial, KeepAlive: 30 * time.Second}).DialContext,
			TLSClientConfig:       tlsCfg,
			TLSHandshakeTimeout:   dial,
			ResponseHeaderTimeout: headers,
			ForceAttemptHTTP2:     true,
		}},
		log: cfg.Logger.With("component", "attach", "agent", display),
		st:  Status{Name: u.Host, URL: display, State: Connecting},
	}
	return c, nil
}

// eventsURL completes an agent address to its /events URL.
func eventsURL(raw string) (string, *url.URL, error) {
	if raw == "" {
		return "", nil, errors.New("attach: no agent URL")
	}
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", nil, fmt.Errorf("attach: agent URL %q: %w", event.RedactURL(raw), err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", nil, fmt.Errorf("attach: agent URL %q: want http://host:port or https://host:port", event.RedactURL(raw))
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/events"
	}
	return u.String(), u, nil
}

func clientTLS(caFile string) (*tls.Config, error) {
	if caFile == "" {
		return nil, nil
	}
	pem, err := fileread.ReadFile(caFile, fileread.Limit{Flag: "--ca-cert", Max: MaxPEMBytes, What: "a certificate"})
	if err != nil {
		return nil, fmt.Errorf("attach: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("attach: ca file %s holds no PEM certificate", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// Status returns the client's state; safe from any goroutine.
func (c *Client) Status() Status {
	c.mu.Lock()
	st := c.st
	c.mu.Unlock()
	// What the agent said of itself (its clock reading's region and
	// shard) and the errors its connections gave are shown as they are
	// told: made safe first.
	for _, s := range []*string{&st.Name, &st.Err, &st.LastErr, &st.Region, &st.Shard, &st.ClockErr} {
		*s = textsafe.Line(*s)
	}
	return st
}

// Name is the agent's session name, else its host.
func (c *Client) Name() string { return c.Status().Name }

// Run streams the agent's events to emit until the agent's session ends
// (nil), ctx ends (nil), or the agent cannot be used (ErrUnauthorized,
// ErrUntrusted, ErrProtocol). Dropped connections are retried with
// Backoff, meanwhile the status says Reconnecting. Every goroutine Run
// starts has stopped when it returns.
func (c *Client) Run(ctx context.Context, emit func(event.Event)) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("attach: a client runs once at a time")
	}
	defer c.running.Store(false)
	defer c.http.CloseIdleConnections()
	var giveUpAt time.Time
	if c.cfg.GiveUp > 0 {
		giveUpAt = time.Now().Add(c.cfg.GiveUp)
	}
	attempt := 0
	for {
		progressed, err := c.connect(ctx, emit)
		switch {
		case ctx.Err() != nil:
			c.setState(Stopped, nil)
			return nil
		case errors.Is(err, errEnded):
			c.setState(Ended, nil)
			return nil
		case errors.Is(err, ErrUnauthorized), errors.Is(err, ErrProtocol), errors.Is(err, ErrUntrusted):
			c.setState(Failed, err)
			return fmt.Errorf("attach %s: %w", c.display, err)
		}
		if progressed {
			attempt = 0
		}
		attempt++
		wait := c.cfg.Backoff.delay(attempt)
		if !giveUpAt.IsZero() && c.Status().Connections == 0 {
			left := time.Until(giveUpAt)
			if left <= 0 {
				c.setState(GaveUp, fmt.Errorf("not reached in %s: %w", c.cfg.GiveUp, err))
				c.log.Warn("giving up: the agent was never reached", "err", err, "after", c.cfg.GiveUp)
				return nil
			}
			// The last try comes at the deadline, not a backoff later.
			wait = min(wait, left)
		}
		c.setReconnecting(err, attempt, time.Now().Add(wait))
		c.log.Info("connection lost; reconnecting", "err", err, "attempt", attempt, "in", wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			c.setState(Stopped, nil)
			return nil
		}
	}
}

// connect makes one connection and reads it until it ends. progressed says
// whether it delivered an event.
func (c *Client) connect(ctx context.Context, emit func(event.Event)) (progressed bool, err error) {
	connCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The watchdog ends a connection that went silent (a dead peer behind
	// a proxy never sends a reset); every read pushes it back.
	watchdog := time.AfterFunc(c.cfg.IdleTimeout, cancel)
	defer watchdog.Stop()

	req, err := http.NewRequestWithContext(connCtx, http.MethodGet, c.url, nil)
	if err != nil {
		return false, fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	if c.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	}
	if c.hasID {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(c.lastID, 10))
		req.Header.Set(StreamHeader, c.run)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var untrusted *tls.CertificateVerificationError
		if errors.As(err, &untrusted) {
			return false, fmt.Errorf("%w: %w", ErrUntrusted, err)
		}
		if ctx.Err() == nil && connCtx.Err() != nil {
			return false, fmt.Errorf("cannot reach %s: nothing received for %s", c.display, c.cfg.IdleTimeout)
		}
		// The url.Error repeats the method and URL; say them once.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return false, fmt.Errorf("cannot reach %s: %w", c.display, err)
	}
	defer resp.Body.Close()
	if err := checkResponse(resp); err != nil {
		return false, err
	}
	if c.cfg.ClockPings > 0 {
		// Before this connection's events, and before the status says
		// Streaming, so that both carry the clock they were dated by.
		watchdog.Stop()
		c.estimateClock(connCtx)
		watchdog.Reset(c.cfg.IdleTimeout)
	}
	c.connected(resp.Header.Get(StreamHeader))
	body := &activity{r: resp.Body, watchdog: watchdog, idle: c.cfg.IdleTimeout}
	progressed, err = c.read(body, emit)
	if ctx.Err() == nil && connCtx.Err() != nil {
		err = fmt.Errorf("nothing received for %s: %w", c.cfg.IdleTimeout, err)
	}
	return progressed, err
}

// checkResponse turns a refusal into the error that says why.
func checkResponse(resp *http.Response) error {
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%w (%s)", ErrUnauthorized, resp.Status)
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusBadRequest ||
		resp.StatusCode == http.StatusMethodNotAllowed:
		return fmt.Errorf("%w: %s", ErrProtocol, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("the agent answered %s", resp.Status) // retried: a proxy or a restart
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return fmt.Errorf("%w: content type %q", ErrProtocol, ct)
	}
	return nil
}

// connected notes a new connection. A different run id means the agent
// restarted: its ids begin again, so the resume point is forgotten.
func (c *Client) connected(run string) {
	restarted := c.run != "" && run != c.run
	if restarted {
		c.lastID, c.hasID = 0, false
		c.log.Warn("the agent restarted; events it published before the restart and after the last one received are unknown")
	}
	c.run = run
	c.mu.Lock()
	c.st.Connections++
	if restarted {
		c.st.Restarts++
	}
	c.mu.Unlock()
	c.setState(Streaming, nil)
}

// read emits the events of one connection.
func (c *Client) read(body io.Reader, emit func(event.Event)) (progressed bool, err error) {
	sr := newSSEReader(body, c.cfg.MaxEventBytes)
	d := decoder{lastID: c.lastID, hasID: c.hasID}
	var dups int64 // dropped since the last event emitted
	defer func() { c.announceDuplicates(dups, emit) }()
	for {
		msg, err := sr.next()
		if err != nil {
			if errors.Is(err, errEventTooLarge) {
				return progressed, fmt.Errorf("%w: after event %d: %w", ErrProtocol, c.lastID, err)
			}
			return progressed, fmt.Errorf("read stream: %w", err)
		}
		ev, ok, err := d.decode(msg)
		if err != nil {
			return progressed, err
		}
		if !ok {
			if d.duplicate {
				c.countDuplicate()
				dups++
			}
			continue
		}
		c.announceDuplicates(dups, emit)
		dups = 0
		emit(ev)
		c.lastID, c.hasID = d.lastID, true
		if t := ev.Time(); !t.IsZero() {
			c.lastTime = t
		}
		c.received(ev)
		progressed = true
	}
}

// announceDuplicates emits a Loss record for n events dropped in a row
// because their ids went backwards, so that the aggregator counts them
// (they are not in its figures) and a screen shows them. It is dated with
// the last event's own time: the agent's clock, never the local one.
func (c *Client) announceDuplicates(n int64, emit func(event.Event)) {
	if n <= 0 {
		return
	}
	emit(event.NewLoss(&event.Loss{Time: c.lastTime, Consumer: event.ConsumerAttach, Events: n,
		Reason: fmt.Sprintf("event ids went backwards (after id %d): dropped as duplicates", c.lastID)}))
}

// activity pushes back the idle watchdog whenever bytes arrive, heartbeat
// comments included.
type activity struct {
	r        io.Reader
	watchdog *time.Timer
	idle     time.Duration
}

func (a *activity) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.watchdog.Reset(a.idle)
	}
	return n, err
}
