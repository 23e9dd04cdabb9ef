package collector

// The host collector watches the machine latscope itself runs on: every
// timing latscope takes includes that machine's delays, so when other
// processes keep its CPUs busy, a pause the probe sees may be the host's
// and not the server's. It reads what Linux gives without privileges:
// the CPU pressure stall information (/proc/pressure/cpu), the steal time
// and the runnable tasks (/proc/stat), and latscope's own CPU time
// (/proc/self/stat). The aggregator judges the samples; this only reads.

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/internal/eventclock"
	"github.com/latscope/latscope/internal/fileread"
)

// DefaultHostInterval is how often the host collector samples when
// HostConfig.Interval is zero: the stall analysis compares each pause with
// the pressure over the interval around it, so a short one is better, and
// a read of three small /proc files costs tens of microseconds.
const DefaultHostInterval = time.Second

// hostSource names the host collector in markers.
const hostSource = "collector.host"

// userHZ is the unit of /proc's CPU times: USER_HZ, 100 on every Linux
// architecture's user-space ABI.
const userHZ = 100

// hostFileLimit bounds one /proc read: /proc/stat grows with the CPUs and
// interrupts, to tens of KB on a large machine.
const hostFileLimit = 1 << 20

// HostConfig configures the host collector.
type HostConfig struct {
	// Interval between samples; zero means DefaultHostInterval.
	Interval time.Duration
	// Root is the proc file system to read ("" means /proc); tests point
	// it at a directory of fixture files.
	Root string
	// Now stamps the samples and times the deltas; nil means time.Now.
	Now func() time.Time
}

// Host samples the client host's CPU pressure. Build it with NewHost.
type Host struct {
	cfg   HostConfig
	clock eventclock.Clock
	prev  hostReading // the previous reading, for the deltas
	told  map[string]bool
	// The three files, kept open between samples.
	psi, stat, self *fileread.Kept
}

// NewHost returns a host collector.
func NewHost(cfg HostConfig) *Host {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultHostInterval
	}
	if cfg.Root == "" {
		cfg.Root = "/proc"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	keep := func(name string) *fileread.Kept {
		return fileread.Keep(filepath.Join(cfg.Root, name), fileread.Limit{Max: hostFileLimit, What: "a /proc file"})
	}
	return &Host{cfg: cfg, clock: eventclock.New(cfg.Now), told: map[string]bool{},
		psi: keep("pressure/cpu"), stat: keep("stat"), self: keep("self/stat")}
}

// hostReading is one read of the files, with what failed.
type hostReading struct {
	at       time.Time
	psi      psiLine
	psiErr   error
	stat     procStat
	statErr  error
	self     uint64 // ticks
	selfErr  error
	complete bool // set once read: a zero reading is "none yet"
}

// Run samples at once and then every interval until ctx ends. When the
// host gives none of the figures (not Linux, no /proc) it says so once, a
// sample and a marker, and emits nothing more.
func (h *Host) Run(ctx context.Context, emit func(event.Event)) error {
	defer h.close()
	if !h.step(emit) {
		<-ctx.Done()
		return nil
	}
	ticker := time.NewTicker(h.cfg.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			h.step(emit)
		}
	}
}

// step reads the host and emits its sample; false when the host gives
// nothing to read, reported then.
func (h *Host) step(emit func(event.Event)) bool {
	r := h.read()
	if r.psiErr != nil && r.statErr != nil {
		if !h.told["all"] {
			h.told["all"] = true
			reason := fmt.Sprintf("host pressure unavailable: %v; %v", r.psiErr, r.statErr)
			emit(event.NewHost(&event.HostSample{Time: r.at, Available: false, Reason: reason}))
			emit(event.NewMarker(&event.Marker{Time: r.at, Kind: event.MarkerCollector, Source: hostSource, Message: reason}))
		}
		return false
	}
	s := h.sample(r)
	h.tellMissing(emit, r)
	emit(event.NewHost(s))
	return true
}

// tellMissing says once which of the figures the host does not give.
func (h *Host) tellMissing(emit func(event.Event), r hostReading) {
	for _, miss := range []struct {
		key, what string
		err       error
	}{
		{"psi", "PSI cpu pressure unavailable (the run queue and steal still show a busy host)", r.psiErr},
		{"stat", "/proc/stat unavailable: no steal or run queue", r.statErr},
		{"self", "latscope's own CPU time unavailable", r.selfErr},
	} {
		if miss.err == nil || h.told[miss.key] {
			continue
		}
		h.told[miss.key] = true
		emit(event.NewMarker(&event.Marker{Time: r.at, Kind: event.MarkerCollector, Source: hostSource,
			Message: fmt.Sprintf("host: %s: %v", miss.what, miss.err)}))
	}
}

// read reads the three files.
func (h *Host) read() hostReading {
	r := hostReading{at: h.clock.Now(), complete: true}
	var text []byte
	if text, r.psiErr = h.psi.Read(); r.psiErr == nil {
		r.psi, r.psiErr = parsePSI(string(text))
	}
	if text, r.statErr = h.stat.Read(); r.statErr == nil {
		r.stat, r.statErr = parseProcStat(string(text))
	}
	if text, r.selfErr = h.self.Read(); r.selfErr == nil {
		r.self, r.selfErr = parseSelfStat(string(text))
	}
	return r
}

// close closes the files kept open.
func (h *Host) close() {
	h.psi.Close()
	h.stat.Close()
	h.self.Close()
}

// sample turns r, against the previous reading, into a sample, and keeps
// r for the next. The first sample has no deltas: its pressure is the
// kernel's 10-second average, so a run on an already busy host can say so
// at once.
func (h *Host) sample(r hostReading) *event.HostSample {
	prev := h.prev
	h.prev = r
	s := &event.HostSample{Time: r.at, Available: true, Cores: runtime.NumCPU()}
	if r.statErr == nil {
		if r.stat.cores > 0 {
			s.Cores = r.stat.cores
		}
		if r.stat.procsRunning >= 0 {
			n := r.stat.procsRunning
			s.RunQueue = &n
		}
	}
	if r.psiErr == nil {
		avg := r.psi.avg10 / 100
		s.PSISomeAvg10 = &avg
	}
	elapsed := r.at.Sub(prev.at)
	if !prev.complete || elapsed < time.Millisecond {
		return s
	}
	s.Interval = elapsed
	if r.psiErr == nil && prev.psiErr == nil && r.psi.total >= prev.psi.total {
		share := min(float64(r.psi.total-prev.psi.total)/float64(elapsed.Microseconds()), 1)
		s.PSISome = &share
	}
	if r.statErr == nil && prev.statErr == nil {
		now, before := r.stat.cpu, prev.stat.cpu
		if now.total() > before.total() && now.steal >= before.steal {
			steal := min(float64(now.steal-before.steal)/float64(now.total()-before.total()), 1)
			s.Steal = &steal
		}
	}
	if r.selfErr == nil && prev.selfErr == nil && r.self >= prev.self {
		cores := float64(r.self-prev.self) / userHZ / elapsed.Seconds()
		s.SelfCPU = &cores
	}
	return s
}
