package collector

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"time"

	"github.com/latscope/latscope/event"
)

// Defaults for PromConfig.
const (
	DefaultScrapeInterval = time.Second
	DefaultMaxBodyBytes   = 32 << 20
	// DialectAuto detects the server from the metric names on every scrape.
	DialectAuto = "auto"
)

// promSource names the Prometheus collector in markers.
const promSource = "collector.prom"

// PromConfig configures a Prometheus scraper.
type PromConfig struct {
	URL      string        // the metrics page, e.g. http://host:8000/metrics
	Interval time.Duration // time between scrapes; DefaultScrapeInterval when zero
	// Timeout bounds one scrape, body included; Interval when zero, so a slow
	// server cannot make scrapes pile up.
	Timeout    time.Duration
	HTTPClient *http.Client // http.DefaultClient when nil
	Dialect    string       // DialectAuto (or empty) to detect, else a name from DialectNames
	// Model keeps only the series of one model (label model_name, or model
	// for Triton); empty sums over every model the server exposes.
	Model string
	// MaxBodyBytes bounds the page size; DefaultMaxBodyBytes when zero.
	MaxBodyBytes int64
}

// Prom scrapes a server's Prometheus metrics and emits one ServerSample per
// scrape. It implements Collector.
type Prom struct {
	cfg     PromConfig
	dialect *Dialect // nil: detect on every scrape
	now     func() time.Time
}

var _ Collector = (*Prom)(nil)

// NewProm checks cfg and fills in its defaults.
func NewProm(cfg PromConfig) (*Prom, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("metrics url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("metrics url %q: want http(s)://host[:port]/path", cfg.URL)
	}
	if cfg.Interval < 0 || cfg.Timeout < 0 || cfg.MaxBodyBytes < 0 {
		return nil, errors.New("metrics scrape interval, timeout and body limit must not be negative")
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultScrapeInterval
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = cfg.Interval
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	p := &Prom{cfg: cfg, now: time.Now}
	if cfg.Dialect != "" && cfg.Dialect != DialectAuto {
		d, err := DialectByName(cfg.Dialect)
		if err != nil {
			return nil, err
		}
		p.dialect = &d
	}
	return p, nil
}

// MetricsURLFor is the default metrics page of a target: its scheme and
// host with the path /metrics (where vLLM, SGLang, TGI, llama.cpp and
// LMDeploy serve it; Triton uses port 8002 and trtllm-serve
// /prometheus/metrics, so those need an explicit URL).
func MetricsURLFor(target string) (string, error) {
	u, err := url.Parse(target)
	if err != nil {
		return "", fmt.Errorf("target url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("target url %q: want http(s)://host[:port]", target)
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/metrics"}).String(), nil
}

// promState is what Run carries from one scrape to the next.
type promState struct {
	prev     *Scrape             // last good scrape
	lastGood *event.ServerSample // last sample derived from a good scrape
	failure  string              // current error, "" when healthy
}

// Run scrapes every Interval, starting at once, until ctx ends; it then
// returns nil. A failed scrape does not stop it: it emits a collector marker
// when the error state changes, repeats the last good values marked Stale,
// and tries again at the next tick.
func (p *Prom) Run(ctx context.Context, emit func(event.Event)) error {
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	var st promState
	for {
		p.scrapeOnce(ctx, &st, emit)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (p *Prom) scrapeOnce(ctx context.Context, st *promState, emit func(event.Event)) {
	cur, err := p.Scrape(ctx)
	if ctx.Err() != nil {
		return // stopping; a cancelled scrape is not a failure
	}
	if err != nil {
		p.fail(st, err.Error(), emit)
		return
	}
	if st.failure != "" {
		st.failure = ""
		emit(event.NewMarker(&event.Marker{Time: cur.Time, Kind: event.MarkerCollector, Source: promSource,
			Message: "metrics scrape recovered: " + p.cfg.URL}))
	}
	cur = FilterModel(cur, p.cfg.Model)
	d := p.dialectFor(cur)
	sample, resets := Derive(st.prev, cur, d)
	if len(resets) > 0 {
		sample.Reset = true
		emit(event.NewMarker(&event.Marker{Time: cur.Time, Kind: event.MarkerCollector, Source: promSource,
			Message: fmt.Sprintf("metrics counters went down (server restarted?): %d series counted from zero", len(resets)),
		}))
	}
	st.prev = cur
	st.lastGood = &sample
	s := sample
	emit(event.NewServer(&s))
}

func (p *Prom) dialectFor(s *Scrape) Dialect {
	if p.dialect != nil {
		return *p.dialect
	}
	return DetectDialect(s)
}

// fail reports a failed scrape: a marker when the error changes, and a
// stale copy of the last good sample (an empty one before the first).
func (p *Prom) fail(st *promState, msg string, emit func(event.Event)) {
	now := p.now()
	if msg != st.failure {
		st.failure = msg
		emit(event.NewMarker(&event.Marker{Time: now, Kind: event.MarkerCollector, Source: promSource, Message: msg}))
	}
	stale := event.ServerSample{Source: p.cfg.URL, Dialect: DialectUnknown}
	if p.dialect != nil {
		stale.Dialect = p.dialect.Name
	}
	if st.lastGood != nil {
		stale = *st.lastGood
		stale.Stages = maps.Clone(stale.Stages)
		stale.Gauges = maps.Clone(stale.Gauges)
	}
	stale.Time = now
	stale.Stale = true
	stale.Error = msg
	emit(event.NewServer(&stale))
}

// Scrape fetches and parses the metrics page once, bounded by Timeout and
// MaxBodyBytes. Its errors read as "metrics scrape failed: ...".
func (p *Prom) Scrape(ctx context.Context) (*Scrape, error) {
	body, at, err := p.fetch(ctx)
	if err != nil {
		return nil, err
	}
	s, err := ParseProm(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("metrics scrape failed: %s: %w", p.cfg.URL, err)
	}
	s.Time = at
	s.Source = p.cfg.URL
	return s, nil
}

// fetch returns the page and when its response began to arrive: the server
// renders the page as it answers, so this is the instant the numbers
// describe, unaffected by how long a large body takes to read and parse.
func (p *Prom) fetch(ctx context.Context) ([]byte, time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.cfg.URL, nil)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("metrics scrape failed: %w", err)
	}
	// Ask for the classic text format: Python servers answer OpenMetrics
	// (exemplars, # EOF) only when asked for it.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := p.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, time.Time{}, p.transportError(ctx, err)
	}
	at := p.now()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// Drain a little so the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, time.Time{}, fmt.Errorf("metrics scrape failed: %s from %s", resp.Status, p.cfg.URL)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, p.cfg.MaxBodyBytes+1))
	if err != nil {
		return nil, time.Time{}, p.transportError(ctx, err)
	}
	if int64(len(body)) > p.cfg.MaxBodyBytes {
		return nil, time.Time{}, fmt.Errorf("metrics scrape failed: page from %s is larger than %d bytes", p.cfg.URL, p.cfg.MaxBodyBytes)
	}
	return body, at, nil
}

// transportError words a failed request; a timeout names the limit rather
// than the context machinery.
func (p *Prom) transportError(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("metrics scrape failed: no complete answer from %s within %s", p.cfg.URL, p.cfg.Timeout)
	}
	return fmt.Errorf("metrics scrape failed: %w", err)
}
