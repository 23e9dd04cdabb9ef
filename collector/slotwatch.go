package collector

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// SlotWatch measures how long a server takes to free the batch slot of a
// request the probe abandoned (--cancel-after): from the moment the probe
// closed the stream to the first scrape of the server's metrics in which
// its running requests (plus waiting, where the server has that gauge)
// no longer count it.
//
// The gauges count requests, not which ones, so the abandoned requests
// still held are counted: the server's running and waiting requests less
// the probe's own requests in flight (SlotWatchConfig.Live). This assumes
// the probe is the server's only client. A drop must hold for
// SlotWatchConfig.Hold before it counts, because a request the probe has
// just sent is in flight before the server counts it (the drop it seems
// to show is the server's lag, not a release); when k abandoned requests
// are pending and the count falls to j < k, the k-j abandoned first are
// released, at the drop's first scrape. The figure is an upper bound
// within one poll interval and the scrape's own time.
type SlotWatch struct {
	cfg SlotWatchConfig

	mu      sync.Mutex
	pending []*slotWait // oldest first
	wake    chan struct{}
}

// SlotWatchConfig configures a SlotWatch.
type SlotWatchConfig struct {
	Prom *Prom // scrapes the server's metrics page
	// Live says how many of the probe's requests are in flight now, the
	// abandoned ones not among them.
	Live func() int
	// Every is the time between scrapes while a release is awaited
	// (default 2 ms); Hold how long a drop must last (default 20 ms);
	// Limit how long a release is awaited (default 5 s).
	Every, Hold, Limit time.Duration
}

// slotWait is one abandoned request awaiting its release.
type slotWait struct {
	closed time.Time
	done   chan SlotRelease // buffered: the watcher never blocks on it
}

// SlotRelease is what the watch found of one abandoned request.
type SlotRelease struct {
	After  time.Duration // closed → released; zero when not seen
	Source string        // the gauges watched, e.g. "metrics:vllm:num_requests_running"
	Note   string        // why not seen, when not
}

// NewSlotWatch checks cfg and fills in its defaults.
func NewSlotWatch(cfg SlotWatchConfig) (*SlotWatch, error) {
	if cfg.Prom == nil || cfg.Live == nil {
		return nil, errors.New("slot watch: a metrics scraper and the probe's count of requests in flight are needed")
	}
	if cfg.Every <= 0 {
		cfg.Every = 2 * time.Millisecond
	}
	if cfg.Hold <= 0 {
		cfg.Hold = 20 * time.Millisecond
	}
	if cfg.Limit <= 0 {
		cfg.Limit = 5 * time.Second
	}
	return &SlotWatch{cfg: cfg, wake: make(chan struct{}, 1)}, nil
}

// Watch waits for the release of the slot of a request whose stream the
// probe closed at closed, until Limit after it or ctx's end; Run must be
// running. It returns how long the release took (zero: not seen, and note
// says why) and the gauges watched.
func (w *SlotWatch) Watch(ctx context.Context, closed time.Time) (after time.Duration, source, note string) {
	r := w.watch(ctx, closed)
	return r.After, r.Source, r.Note
}

func (w *SlotWatch) watch(ctx context.Context, closed time.Time) SlotRelease {
	sw := &slotWait{closed: closed, done: make(chan SlotRelease, 1)}
	w.mu.Lock()
	w.pending = append(w.pending, sw)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	t := time.NewTimer(max(time.Until(closed.Add(w.cfg.Limit)), 0) + w.cfg.Every)
	defer t.Stop()
	select {
	case r := <-sw.done:
		return r
	case <-t.C:
	case <-ctx.Done():
	}
	w.drop(sw)
	select {
	case r := <-sw.done: // released meanwhile
		return r
	default:
	}
	if ctx.Err() != nil {
		return SlotRelease{Note: "the run ended before the release was seen"}
	}
	return SlotRelease{Note: fmt.Sprintf("not seen within %s (the server kept the slot, or other clients' requests hid it)", w.cfg.Limit)}
}

// drop removes sw from the pending list.
func (w *SlotWatch) drop(sw *slotWait) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, p := range w.pending {
		if p == sw {
			w.pending = append(w.pending[:i], w.pending[i+1:]...)
			return
		}
	}
}

// Run scrapes while releases are awaited, until ctx ends.
func (w *SlotWatch) Run(ctx context.Context) {
	tick := time.NewTicker(w.cfg.Every)
	defer tick.Stop()
	var dropSince time.Time // first scrape of the current drop
	for {
		w.mu.Lock()
		idle := len(w.pending) == 0
		w.mu.Unlock()
		if idle {
			dropSince = time.Time{}
			select {
			case <-ctx.Done():
				return
			case <-w.wake:
			}
			continue
		}
		select {
		case <-ctx.Done():
			w.failAll(SlotRelease{Note: "the run ended before the release was seen"})
			return
		case <-tick.C:
		}
		dropSince = w.poll(ctx, dropSince)
	}
}

// poll scrapes once and releases the pending requests the gauges no
// longer count, once their drop has held; it returns the drop's start.
func (w *SlotWatch) poll(ctx context.Context, dropSince time.Time) time.Time {
	s, err := w.cfg.Prom.Scrape(ctx)
	if err != nil {
		return time.Time{}
	}
	live := w.cfg.Live()
	d := w.cfg.Prom.dialectFor(s)
	running := sumGauge(s, d.Running)
	if running == nil {
		w.failAll(SlotRelease{Note: "the metrics page has no running-requests gauge latscope knows"})
		return time.Time{}
	}
	source := "metrics:" + d.Running[0].Name
	held := *running
	if waiting := sumGauge(s, d.Waiting); waiting != nil {
		held += *waiting
		source += "+" + d.Waiting[0].Name
	}
	held -= float64(live) // the abandoned requests the server still counts
	w.mu.Lock()
	defer w.mu.Unlock()
	k := len(w.pending)
	if held >= float64(k) {
		return time.Time{}
	}
	if dropSince.IsZero() {
		dropSince = s.Time
	}
	if s.Time.Sub(dropSince) < w.cfg.Hold {
		return dropSince
	}
	n := k - max(int(held), 0)
	for _, p := range w.pending[:n] {
		p.done <- SlotRelease{After: max(dropSince.Sub(p.closed), 0), Source: source}
	}
	w.pending = append(w.pending[:0], w.pending[n:]...)
	return time.Time{}
}

// failAll ends every pending watch with r.
func (w *SlotWatch) failAll(r SlotRelease) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.pending {
		p.done <- r
	}
	w.pending = w.pending[:0]
}
