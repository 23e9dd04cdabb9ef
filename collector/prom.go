package collector

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/internal/eventclock"
	"github.com/latscope/latscope/promdialect"
)

// Defaults for PromConfig.
const (
	DefaultScrapeInterval = time.Second
	DefaultMaxBodyBytes   = 16 << 20
	// DefaultMaxLines bounds a page's lines. Parsing takes about 1.3 KB a
	// line, so this keeps a scrape under about 70 MB; vLLM's page has a
	// few thousand lines, Triton's a few dozen per model.
	DefaultMaxLines = 50_000
	// DialectAuto detects the server from the metric names on every scrape.
	DialectAuto = "auto"
)

// promSource names the Prometheus collector in markers.
const promSource = "collector.prom"

// Errors of a scrape, besides the transport's and the parser's.
var (
	// ErrPageTooLarge: the page is over MaxBodyBytes or MaxLines; it is
	// not parsed.
	ErrPageTooLarge = errors.New("metrics page over the limit")
	// ErrModelLoading: the server answers 503 because it is still loading
	// its model (llama-server: "Loading model").
	ErrModelLoading = errors.New("model loading")
	// ErrNoMetricsPage: the server answers 404 for the metrics page (Ollama
	// serves none; a gateway may hide it).
	ErrNoMetricsPage = errors.New("no metrics page")
)

// PromConfig configures a Prometheus scraper.
type PromConfig struct {
	URL      string        // the metrics page, e.g. http://host:8000/metrics
	Interval time.Duration // time between scrapes; DefaultScrapeInterval when zero
	// Timeout bounds one scrape, reading and parsing the body included;
	// Interval when zero, so a slow server cannot make scrapes pile up.
	Timeout time.Duration
	// HTTPClient makes the requests (its Transport carries TLS settings: a
	// custom CA, or skipping verification); http.DefaultClient when nil.
	// While Header or the URL carries credentials, a redirect to another
	// host, or from https to http, is refused.
	HTTPClient *http.Client
	// Header is sent with every scrape (an API key or a gateway's header).
	// Its values never appear in markers, errors or samples.
	Header  http.Header
	Dialect string // DialectAuto (or empty) to detect, else a name from promdialect.Names
	// Model keeps only the series of one model (label model_name, or model
	// for Triton); empty sums over every model the server exposes.
	Model string
	// MaxBodyBytes and MaxLines bound one page (every histogram bucket is a
	// line), and with them the memory a scrape takes; DefaultMaxBodyBytes
	// and DefaultMaxLines when zero. A page over either is refused with a
	// collector marker.
	MaxBodyBytes int64
	MaxLines     int
	// OwnInFlight, when set, says how many of the probe's requests are in
	// flight now (probe.Runner.InFlight). The run's first scrape compares
	// it with the server's waiting and running requests, to warn when the
	// server was busy with other clients' requests as the run began (see
	// othersInFlight). Nil: no such check.
	OwnInFlight func() int
}

// Prom scrapes a server's Prometheus metrics and emits one ServerSample per
// scrape. It is a pipeline.Source.
type Prom struct {
	cfg      PromConfig
	shownURL string               // cfg.URL without credentials, for markers, errors and samples
	client   *http.Client         // cfg.HTTPClient, refusing redirects that would leak credentials
	dialect  *promdialect.Dialect // nil: detect on every scrape
	now      func() time.Time
}

// NewProm checks cfg and fills in its defaults.
func NewProm(cfg PromConfig) (*Prom, error) {
	u, err := cfg.check()
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	p := &Prom{cfg: cfg, shownURL: event.RedactURL(cfg.URL), client: cfg.HTTPClient, now: time.Now}
	if len(cfg.Header) > 0 || u.User != nil {
		p.client = refuseLeakingRedirects(cfg.HTTPClient)
	}
	if cfg.Dialect != "" && cfg.Dialect != DialectAuto {
		d, err := promdialect.ByName(cfg.Dialect)
		if err != nil {
			return nil, err
		}
		p.dialect = &d
	}
	return p, nil
}

// check reports the first problem with c: its URL (returned parsed), a
// negative limit, or a header that cannot be sent.
func (c PromConfig) check() (*url.URL, error) {
	u, err := url.Parse(c.URL)
	if err != nil {
		return nil, fmt.Errorf("metrics url %s: %w", event.RedactURL(c.URL), withoutURL(err))
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("metrics url %q: want http(s)://host[:port]/path", event.RedactURL(c.URL))
	}
	if c.Interval < 0 || c.Timeout < 0 || c.MaxBodyBytes < 0 || c.MaxLines < 0 {
		return nil, errors.New("metrics scrape interval, timeout and page limits must not be negative")
	}
	for name, values := range c.Header {
		if err := checkHeader(name, values); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// withDefaults fills in what c leaves zero, and copies its header so that
// the caller's map stays the caller's.
func (c PromConfig) withDefaults() PromConfig {
	if c.Interval == 0 {
		c.Interval = DefaultScrapeInterval
	}
	if c.Timeout == 0 {
		c.Timeout = c.Interval
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxLines == 0 {
		c.MaxLines = DefaultMaxLines
	}
	if c.HTTPClient == nil {
		c.HTTPClient = http.DefaultClient
	}
	c.Header = c.Header.Clone()
	return c
}

// checkHeader refuses a header that cannot be sent as one line, naming the
// header but never showing its value.
func checkHeader(name string, values []string) error {
	isToken := func(c rune) bool {
		return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)
	}
	if name == "" || strings.IndexFunc(name, func(c rune) bool { return !isToken(c) }) >= 0 {
		return fmt.Errorf("metrics scrape header %q: not a valid header name", name)
	}
	for _, v := range values {
		if strings.IndexFunc(v, func(c rune) bool { return c < ' ' && c != '\t' || c == 0x7f }) >= 0 {
			return fmt.Errorf("metrics scrape header %q: its value holds a control character", name)
		}
	}
	return nil
}

// refuseLeakingRedirects returns a copy of c that does not follow a
// redirect to another host, or from https to http: the scrape's
// credentials go only where they were meant to. Go's client drops
// Authorization and Cookie on such a redirect, but not other headers (an
// X-Api-Key, a gateway's own).
func refuseLeakingRedirects(c *http.Client) *http.Client {
	guarded := *c
	next := c.CheckRedirect
	guarded.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		from := via[0].URL
		if !strings.EqualFold(req.URL.Host, from.Host) || from.Scheme == "https" && req.URL.Scheme != "https" {
			return fmt.Errorf("redirect to %s://%s refused: the scrape's credentials go only to %s://%s",
				req.URL.Scheme, req.URL.Host, from.Scheme, from.Host)
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &guarded
}

// MetricsURLFor is the default metrics page of a target: its scheme and
// host with the path /metrics (where vLLM, SGLang, TGI, llama.cpp and
// LMDeploy serve it; Triton uses port 8002 and trtllm-serve
// /prometheus/metrics, so those need an explicit URL).
func MetricsURLFor(target string) (string, error) {
	u, err := url.Parse(target)
	if err != nil {
		return "", fmt.Errorf("target url %s: %w", event.RedactURL(target), withoutURL(err))
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("target url %q: want http(s)://host[:port]", event.RedactURL(target))
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/metrics"}).String(), nil
}

// promState is what Run carries from one scrape to the next.
type promState struct {
	prev     *Scrape             // last good scrape
	lastGood *event.ServerSample // last sample derived from a good scrape
	failure  string              // current error, "" when healthy
	scraped  bool                // a scrape has been tried: the run's beginning is over
	absent   bool                // the page answered 404 before any good scrape: not scraped again
	clock    eventclock.Clock    // keeps the collector's events in time order
}

// Run scrapes every Interval, starting at once, until ctx ends; it then
// returns nil. A failed scrape does not stop it: it emits a collector marker
// when the error state changes, repeats the last good values marked Stale,
// and tries again at the next tick. The one exception: a page that answers
// 404 before it ever answered well is not there (Ollama has none), so it
// is said once and not asked for again, rather than once a second in the
// server's access log.
func (p *Prom) Run(ctx context.Context, emit func(event.Event)) error {
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	st := promState{clock: eventclock.New(p.now)}
	for {
		p.scrapeOnce(ctx, &st, emit)
		if st.absent {
			<-ctx.Done()
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (p *Prom) scrapeOnce(ctx context.Context, st *promState, emit func(event.Event)) {
	atStart := !st.scraped
	st.scraped = true
	ownBefore := p.ownInFlight()
	cur, err := p.Scrape(ctx)
	if ctx.Err() != nil {
		return // stopping; a cancelled scrape is not a failure
	}
	if err != nil {
		msg := err.Error()
		if errors.Is(err, ErrNoMetricsPage) && st.prev == nil {
			st.absent = true
			msg = fmt.Sprintf("no metrics page: %s answers 404 Not Found; it is not asked again, and the server's own figures come from its responses alone", p.shownURL)
		}
		p.fail(st, msg, emit)
		return
	}
	cur.Time = st.clock.Stamp(cur.Time)
	marker := func(msg string, values map[string]float64) {
		emit(event.NewMarker(&event.Marker{Time: cur.Time, Kind: event.MarkerCollector, Source: promSource, Message: msg, Values: values}))
	}
	if st.failure != "" {
		st.failure = ""
		marker("metrics scrape recovered: "+p.shownURL, nil)
	}
	cur = FilterModel(cur, p.cfg.Model)
	d := p.dialectFor(cur)
	sample, resets := Derive(st.prev, cur, d)
	if len(resets) > 0 {
		sample.Reset = true
		marker(fmt.Sprintf("metrics counters went down (server restarted?): %d series counted from zero", len(resets)), nil)
	}
	if atStart && p.cfg.OwnInFlight != nil {
		ours := max(ownBefore, p.ownInFlight())
		if others := othersInFlight(sample.Waiting, sample.Running, ours); others > 0 {
			marker(notIdleMessage(sample.Waiting, sample.Running, ours), map[string]float64{
				"waiting": deref(sample.Waiting), "running": deref(sample.Running), "ours": float64(ours), "others": others,
			})
		}
	}
	st.prev = cur
	st.lastGood = &sample
	s := sample
	emit(event.NewServer(&s))
}

func (p *Prom) ownInFlight() int {
	if p.cfg.OwnInFlight == nil {
		return 0
	}
	return p.cfg.OwnInFlight()
}

// othersInFlight is how many of the requests a server reports waiting and
// running are not the probe's, given that at most ours of the probe's were
// in flight: at least that many belong to other clients (or to a run that
// ended before this one). Zero when it cannot tell.
//
// The rule: only the run's first scrape is judged (if it fails, none is),
// against the larger in-flight count the probe had just before the scrape
// was sent and just after its answer came. As the run is only beginning,
// the probe has hardly finished a request yet, so the server cannot be
// counting more of its requests than that (in closed loop they never
// exceed the concurrency); what it counts beyond them was there before the
// run. A later scrape is not judged: by then a server whose gauges lag may
// still count requests the probe has finished.
func othersInFlight(waiting, running *float64, ours int) float64 {
	total := deref(waiting) + deref(running)
	others := math.Floor(total - float64(ours))
	if others < 1 || !isFiniteFloat(others) {
		return 0
	}
	return others
}

func notIdleMessage(waiting, running *float64, ours int) string {
	return fmt.Sprintf("server was not idle when the run began: it reports %g waiting and %g running, at most %d of them latscope's; "+
		"its queue and stage figures include other clients' requests until those drain",
		deref(waiting), deref(running), ours)
}

func deref(x *float64) float64 {
	if x == nil {
		return 0
	}
	return *x
}

func (p *Prom) dialectFor(s *Scrape) promdialect.Dialect {
	if p.dialect != nil {
		return *p.dialect
	}
	return DetectDialect(s)
}

// fail reports a failed scrape: a marker when the error changes, and a
// stale copy of the last good sample (an empty one before the first).
func (p *Prom) fail(st *promState, msg string, emit func(event.Event)) {
	now := st.clock.Now()
	if msg != st.failure {
		st.failure = msg
		emit(event.NewMarker(&event.Marker{Time: now, Kind: event.MarkerCollector, Source: promSource, Message: msg}))
	}
	stale := event.ServerSample{Source: p.shownURL, Dialect: promdialect.Unknown}
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

// Scrape fetches and parses the metrics page once, both within Timeout,
// MaxBodyBytes and MaxLines: the page is parsed as it arrives, so neither
// a huge page nor a slow one can hold memory or time past those bounds.
// Its errors read as "metrics scrape failed: ...", "model loading: ..." or
// "metrics page over the limit: ...", and never carry credentials.
func (p *Prom) Scrape(ctx context.Context) (*Scrape, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	resp, at, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	page := &pageReader{ctx: ctx, r: resp.Body, maxBytes: p.cfg.MaxBodyBytes, maxLines: p.cfg.MaxLines}
	s, err := parseProm(ctx, page)
	switch {
	case page.over != "":
		return nil, fmt.Errorf("%w: %s has %s; it is not scraped", ErrPageTooLarge, p.shownURL, page.over)
	case page.err != nil:
		return nil, p.transportError(ctx, page.err)
	case err != nil:
		if ctx.Err() != nil {
			return nil, p.transportError(ctx, ctx.Err())
		}
		return nil, fmt.Errorf("metrics scrape failed: %s: %w", p.shownURL, err)
	}
	s.Time = at
	s.Source = p.shownURL
	return s, nil
}

// get sends the request and returns the response of a 200 and when it
// began to arrive: the server renders the page as it answers, so this is
// the instant the numbers describe, unaffected by how long a large body
// takes to read and parse.
func (p *Prom) get(ctx context.Context) (*http.Response, time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.cfg.URL, nil)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("metrics scrape failed: %s: %w", p.shownURL, withoutURL(err))
	}
	for name, values := range p.cfg.Header {
		req.Header[name] = values
	}
	// Ask for the classic text format: Python servers answer OpenMetrics
	// (exemplars, # EOF) only when asked for it.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, time.Time{}, p.transportError(ctx, err)
	}
	at := p.now()
	if resp.StatusCode == http.StatusOK {
		return resp, at, nil
	}
	defer resp.Body.Close()
	// Read a little: it says whether the model is loading, and lets the
	// connection be reused.
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode == http.StatusServiceUnavailable && bytes.Contains(bytes.ToLower(head), []byte("loading")) {
		return nil, time.Time{}, fmt.Errorf("%w: %s answers %s; server metrics follow once the model is loaded", ErrModelLoading, p.shownURL, resp.Status)
	}
	if resp.StatusCode == http.StatusNotFound {
		return nil, time.Time{}, fmt.Errorf("metrics scrape failed: %s from %s: %w", resp.Status, p.shownURL, ErrNoMetricsPage)
	}
	return nil, time.Time{}, fmt.Errorf("metrics scrape failed: %s from %s", resp.Status, p.shownURL)
}

// transportError words a failed request or body read. A timeout names the
// limit rather than the context machinery; a *url.Error's own URL is left
// out, as it may carry credentials (Go hides only the password).
func (p *Prom) transportError(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("metrics scrape failed: no complete answer from %s within %s", p.shownURL, p.cfg.Timeout)
	}
	return fmt.Errorf("metrics scrape failed: %s: %w", p.shownURL, withoutURL(err))
}

// withoutURL is err without the URL a *url.Error names, which may carry
// credentials (Go hides only the password, not the user or the query).
func withoutURL(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}

// pageReader reads a metrics page within the scrape's bounds: it fails once
// ctx ends (so the parser, which reads as it goes, stops with it) or the
// page passes maxBytes or maxLines. err keeps the first failure, and over
// says which limit was passed.
type pageReader struct {
	ctx      context.Context
	r        io.Reader
	maxBytes int64
	maxLines int
	bytes    int64
	lines    int
	err      error
	over     string
}

func (pr *pageReader) Read(b []byte) (int, error) {
	if pr.err != nil {
		return 0, pr.err
	}
	if err := pr.ctx.Err(); err != nil {
		pr.err = err
		return 0, err
	}
	// Read no more than one byte past the limit: enough to know it is passed.
	if room := pr.maxBytes + 1 - pr.bytes; int64(len(b)) > room {
		b = b[:room]
	}
	n, err := pr.r.Read(b)
	pr.bytes += int64(n)
	pr.lines += bytes.Count(b[:n], []byte{'\n'})
	switch {
	case pr.bytes > pr.maxBytes:
		pr.over = fmt.Sprintf("more than %d bytes", pr.maxBytes)
	case pr.lines > pr.maxLines:
		pr.over = fmt.Sprintf("more than %d lines", pr.maxLines)
	case err != nil && err != io.EOF:
		pr.err = err
		return n, err
	default:
		return n, err
	}
	pr.err = ErrPageTooLarge
	return 0, pr.err
}
