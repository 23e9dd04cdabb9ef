package collector

// The GPU exporter collector: where latscope does not run on the GPU's
// node (a Kubernetes cluster), the GPUs' figures come from the exporters
// that do: NVIDIA's dcgm-exporter or AMD's device-metrics-exporter. This
// file fetches their pages; gpu_exporter_parse.go reads them.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/internal/eventclock"
)

// gpuExporterSource names the GPU exporter collector in markers.
const gpuExporterSource = "collector.gpu-metrics"

// gpuMetricsUnavailablePrefix starts the reason of a sample that has no
// GPU to show because no exporter page could be read.
const gpuMetricsUnavailablePrefix = "GPU metrics unavailable: "

// dnsScheme, before http://, asks for every address the URL's host
// resolves to to be scraped (a headless Service: one address per node's
// exporter pod), as Prometheus' and Thanos' "dns+" service discovery do.
const dnsScheme = "dns+"

// maxGPUScrapesAtOnce bounds the pages fetched together in one interval.
const maxGPUScrapesAtOnce = 16

// GPUExporterConfig configures the GPU exporter collector.
type GPUExporterConfig struct {
	// URLs are the exporters' metrics pages (--gpu-metrics-url), e.g.
	// http://dcgm-exporter.gpu-operator.svc:9400/metrics; see
	// SplitGPUMetricsURLs. A URL written dns+http://host:port/path scrapes
	// every address host resolves to, looked up again at each interval.
	URLs []string
	// Interval between samples (--gpu-interval); DefaultGPUInterval when zero.
	Interval time.Duration
	// Timeout bounds one page's scrape; Interval when zero.
	Timeout time.Duration
	// HTTPClient makes the requests; http.DefaultClient when nil. While a
	// URL carries credentials, a redirect to another host is refused.
	HTTPClient *http.Client
	// MaxBodyBytes and MaxLines bound one page, as PromConfig's do;
	// DefaultMaxBodyBytes and DefaultMaxLines when zero.
	MaxBodyBytes int64
	MaxLines     int
	// Now stamps the samples; nil means time.Now.
	Now func() time.Time
	// LookupHost resolves a dns+ URL's host; net.DefaultResolver's when nil.
	LookupHost func(ctx context.Context, host string) ([]string, error)
}

// GPUExporter scrapes GPU exporters' metrics pages and emits one
// GPUSample per interval holding every GPU they report. It is a
// pipeline.Source.
type GPUExporter struct {
	cfg     GPUExporterConfig
	targets []gpuTarget
}

// gpuTarget is one configured page.
type gpuTarget struct {
	u            *url.URL // without the dns+ prefix
	shown        string   // the URL without credentials, for markers, errors and samples
	everyAddress bool     // dns+: scrape each address of u's host
	client       *http.Client
}

// SplitGPUMetricsURLs turns the values of a repeatable, comma-separated
// flag (--gpu-metrics-url a,b --gpu-metrics-url c) into one URL each,
// dropping empty ones.
func SplitGPUMetricsURLs(values []string) []string {
	var urls []string
	for _, v := range values {
		for _, u := range strings.Split(v, ",") {
			if u = strings.TrimSpace(u); u != "" {
				urls = append(urls, u)
			}
		}
	}
	return urls
}

// NewGPUExporter checks cfg and fills in its defaults.
func NewGPUExporter(cfg GPUExporterConfig) (*GPUExporter, error) {
	if len(cfg.URLs) == 0 {
		return nil, errors.New("GPU metrics: no exporter URL")
	}
	if cfg.Interval < 0 || cfg.Timeout < 0 || cfg.MaxBodyBytes < 0 || cfg.MaxLines < 0 {
		return nil, errors.New("GPU metrics: interval, timeout and page limits must not be negative")
	}
	cfg.Interval = cmp.Or(cfg.Interval, DefaultGPUInterval)
	cfg.Timeout = cmp.Or(cfg.Timeout, cfg.Interval)
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, DefaultMaxBodyBytes)
	cfg.MaxLines = cmp.Or(cfg.MaxLines, DefaultMaxLines)
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.LookupHost == nil {
		cfg.LookupHost = net.DefaultResolver.LookupHost
	}
	g := &GPUExporter{cfg: cfg}
	for _, raw := range cfg.URLs {
		t, err := newGPUTarget(raw, cfg.HTTPClient)
		if err != nil {
			return nil, err
		}
		g.targets = append(g.targets, t)
	}
	return g, nil
}

func newGPUTarget(raw string, client *http.Client) (gpuTarget, error) {
	rest, every := strings.CutPrefix(raw, dnsScheme)
	shown := event.RedactURL(rest)
	if every {
		shown = dnsScheme + shown
	}
	u, err := url.Parse(rest)
	if err != nil {
		return gpuTarget{}, fmt.Errorf("GPU metrics url %s: %w", shown, withoutURL(err))
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return gpuTarget{}, fmt.Errorf("GPU metrics url %q: want http(s)://host[:port]/path or dns+http://host:port/path", shown)
	}
	if every && (u.Scheme != "http" || u.Port() == "") {
		// An address in place of the name would fail TLS's name check.
		return gpuTarget{}, fmt.Errorf("GPU metrics url %q: dns+ takes http://host:port/path", shown)
	}
	t := gpuTarget{u: u, shown: event.RedactURL(rest), everyAddress: every, client: client}
	if u.User != nil {
		t.client = refuseLeakingRedirects(client)
	}
	return t, nil
}

// gpuPageKey names one page read at an interval: a configured URL, or one
// address of a dns+ URL.
type gpuPageKey struct {
	target int
	addr   string // "" for a plain URL
}

// gpuPage is the outcome of reading one page (or of failing to resolve a
// dns+ URL: then addr is "" and err says why).
type gpuPage struct {
	key  gpuPageKey
	devs []event.GPUDevice
	err  error
}

// gpuExporterState is what Run carries from one interval to the next.
type gpuExporterState struct {
	last    map[gpuPageKey][]event.GPUDevice // each page's last good GPUs
	failing map[gpuPageKey]string            // each failing page's error
	clock   eventclock.Clock
}

// Run scrapes every page at once and then every Interval until ctx ends;
// it then returns nil. A page that fails does not stop it: a collector
// marker says so when its error changes, its last good GPUs are shown
// marked Stale, and it is tried again at the next interval. When no page
// has ever been read, the sample says Available=false and why.
func (g *GPUExporter) Run(ctx context.Context, emit func(event.Event)) error {
	t := time.NewTicker(g.cfg.Interval)
	defer t.Stop()
	st := gpuExporterState{last: map[gpuPageKey][]event.GPUDevice{}, failing: map[gpuPageKey]string{}, clock: eventclock.New(g.cfg.Now)}
	for {
		if ctx.Err() != nil {
			return nil
		}
		pages := g.scrapeAll(ctx)
		if ctx.Err() != nil {
			return nil // stopping; a cancelled scrape is not a failure
		}
		g.emitSample(&st, pages, emit)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Probe reads every page once and returns a line for the CLI, as GPU.Probe
// does: "GPU metrics: 4 GPUs (dcgm, amd) on gpu-node-a, mi300-node-1", with
// the pages that failed after it, or "GPU metrics unavailable: <why>" when
// none could be read. It is safe to call before Run.
func (g *GPUExporter) Probe(ctx context.Context) (available bool, line string) {
	var devs []event.GPUDevice
	var failed []string
	for _, p := range g.scrapeAll(ctx) {
		if p.err != nil {
			failed = append(failed, p.err.Error())
		}
		devs = append(devs, p.devs...)
	}
	devs = dedupeGPUs(devs)
	if len(devs) == 0 {
		return false, gpuMetricsUnavailablePrefix + strings.Join(failed, "; ")
	}
	var sources, hosts []string
	for _, d := range devs {
		if !slices.Contains(sources, d.Source) {
			sources = append(sources, d.Source)
		}
		if h := cmp.Or(d.Host, "?"); !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	n := fmt.Sprintf("%d GPUs", len(devs))
	if len(devs) == 1 {
		n = "1 GPU"
	}
	line = fmt.Sprintf("GPU metrics: %s (%s) on %s", n, strings.Join(sources, ", "), strings.Join(hosts, ", "))
	if len(failed) > 0 {
		line += "; " + strings.Join(failed, "; ")
	}
	return true, line
}

// emitSample turns one interval's pages into markers and one sample.
func (g *GPUExporter) emitSample(st *gpuExporterState, pages []gpuPage, emit func(event.Event)) {
	now := st.clock.Now()
	marker := func(msg string) {
		emit(event.NewMarker(&event.Marker{Time: now, Kind: event.MarkerCollector, Source: gpuExporterSource, Message: msg}))
	}
	var devs []event.GPUDevice
	var reasons []string
	unresolved := map[int]bool{}
	seen := map[gpuPageKey]bool{}
	for _, p := range pages {
		seen[p.key] = true
		if p.err == nil {
			if st.failing[p.key] != "" {
				delete(st.failing, p.key)
				marker("GPU metrics scrape recovered: " + g.pageName(p.key))
			}
			st.last[p.key] = p.devs
			devs = append(devs, p.devs...)
			continue
		}
		msg := p.err.Error()
		if st.failing[p.key] != msg {
			st.failing[p.key] = msg
			marker(msg)
		}
		reasons = append(reasons, msg)
		if p.key.addr == "" {
			unresolved[p.key.target] = true
		}
		devs = append(devs, staleGPUs(st.last[p.key])...)
	}
	// A dns+ URL that did not resolve keeps its pages' last GPUs, stale; a
	// page it no longer resolves to (an exporter pod gone) is forgotten.
	for _, k := range slices.SortedFunc(maps.Keys(st.last), compareGPUPageKeys) {
		switch {
		case seen[k]:
		case unresolved[k.target]:
			devs = append(devs, staleGPUs(st.last[k])...)
		default:
			delete(st.last, k)
			delete(st.failing, k)
		}
	}
	devs = dedupeGPUs(devs)
	if len(devs) == 0 {
		reason := gpuMetricsUnavailablePrefix + strings.Join(reasons, "; ")
		emit(event.NewGPU(&event.GPUSample{Time: now, Available: false, Reason: reason, Collector: event.GPUCollectorExporter}))
		return
	}
	emit(event.NewGPU(&event.GPUSample{Time: now, Available: true, Collector: event.GPUCollectorExporter, Devices: devs}))
}

func compareGPUPageKeys(a, b gpuPageKey) int {
	if a.target != b.target {
		return a.target - b.target
	}
	return strings.Compare(a.addr, b.addr)
}

// pageName is how markers name a page: its URL, and the address for a
// dns+ URL.
func (g *GPUExporter) pageName(k gpuPageKey) string {
	t := g.targets[k.target]
	if k.addr == "" {
		return t.shown
	}
	return t.shown + " at " + k.addr
}

// staleGPUs returns copies of devs marked Stale.
func staleGPUs(devs []event.GPUDevice) []event.GPUDevice {
	out := make([]event.GPUDevice, len(devs))
	for i, d := range devs {
		d.Stale = true
		out[i] = d
	}
	return out
}

// dedupeGPUs keeps the first of GPUs read twice (a host that resolves to
// both an IPv4 and an IPv6 address, or two URLs of one exporter).
func dedupeGPUs(devs []event.GPUDevice) []event.GPUDevice {
	type id struct {
		source, host, uuid, partition string
		index                         int
	}
	seen := map[id]bool{}
	out := devs[:0:0]
	for _, d := range devs {
		k := id{d.Source, d.Host, d.UUID, d.Partition, d.Index}
		if d.UUID == "" && d.Host == "" {
			k.host = d.SourceURL // nothing names it: trust the page
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, d)
		}
	}
	return out
}

// scrapeAll reads every page, at most maxGPUScrapesAtOnce at a time, and
// returns when all are done: in the configured order, a dns+ URL's pages
// by address.
func (g *GPUExporter) scrapeAll(ctx context.Context) []gpuPage {
	var jobs []gpuPage
	for i, t := range g.targets {
		if !t.everyAddress {
			jobs = append(jobs, gpuPage{key: gpuPageKey{target: i}})
			continue
		}
		list, err := g.resolve(ctx, t)
		if err != nil {
			jobs = append(jobs, gpuPage{key: gpuPageKey{target: i}, err: err})
			continue
		}
		for _, a := range list {
			jobs = append(jobs, gpuPage{key: gpuPageKey{target: i, addr: a}})
		}
	}
	sem := make(chan struct{}, maxGPUScrapesAtOnce)
	var wg sync.WaitGroup
	for i := range jobs {
		if jobs[i].err != nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(p *gpuPage) {
			defer wg.Done()
			defer func() { <-sem }()
			p.devs, p.err = g.scrapePage(ctx, p.key)
		}(&jobs[i])
	}
	wg.Wait()
	return jobs
}

// resolve looks up a dns+ URL's host within Timeout, returning its
// addresses sorted and without repeats.
func (g *GPUExporter) resolve(ctx context.Context, t gpuTarget) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.Timeout)
	defer cancel()
	list, err := g.cfg.LookupHost(ctx, t.u.Hostname())
	if err == nil && len(list) == 0 {
		err = errors.New("no address")
	}
	if err != nil {
		return nil, fmt.Errorf("GPU metrics scrape failed: %s: resolve %s: %w", t.shown, t.u.Hostname(), err)
	}
	slices.Sort(list)
	return slices.Compact(list), nil
}

// scrapePage fetches and reads one page within Timeout, MaxBodyBytes and
// MaxLines. Its errors read "GPU metrics scrape failed: ..." or "metrics
// page over the limit: ...", and never carry credentials.
func (g *GPUExporter) scrapePage(ctx context.Context, k gpuPageKey) ([]event.GPUDevice, error) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.Timeout)
	defer cancel()
	t := g.targets[k.target]
	name := g.pageName(k)
	u := *t.u
	shownURL := t.shown
	if k.addr != "" {
		u.Host = net.JoinHostPort(k.addr, t.u.Port())
		shownURL = event.RedactURL(u.String())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("GPU metrics scrape failed: %s: %w", name, withoutURL(err))
	}
	req.Host = t.u.Host // the name, also when an address is dialled
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, g.transportError(ctx, name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) // lets the connection be reused
		return nil, fmt.Errorf("GPU metrics scrape failed: %s from %s", resp.Status, name)
	}
	page := &pageReader{ctx: ctx, r: resp.Body, maxBytes: g.cfg.MaxBodyBytes, maxLines: g.cfg.MaxLines}
	s, err := parseProm(ctx, page)
	switch {
	case page.over != "":
		return nil, fmt.Errorf("%w: %s has %s; it is not scraped", ErrPageTooLarge, name, page.over)
	case page.err != nil:
		return nil, g.transportError(ctx, name, page.err)
	case errors.Is(err, ErrNoMetrics):
		err = ErrNoGPUMetrics
	case err != nil && ctx.Err() != nil:
		return nil, g.transportError(ctx, name, ctx.Err())
	}
	var devs []event.GPUDevice
	if err == nil {
		devs, err = gpuDevicesFromScrape(s)
	}
	if err != nil {
		return nil, fmt.Errorf("GPU metrics scrape failed: %s: %w", name, err)
	}
	for i := range devs {
		devs[i].SourceURL = shownURL
	}
	return devs, nil
}

// transportError words a failed request or body read, naming a timeout's
// limit rather than the context machinery.
func (g *GPUExporter) transportError(ctx context.Context, name string, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("GPU metrics scrape failed: no complete answer from %s within %s", name, g.cfg.Timeout)
	}
	return fmt.Errorf("GPU metrics scrape failed: %s: %w", name, withoutURL(err))
}
