package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"
)

// The soak targets: memory follows the configuration, not the traffic.
const (
	TargetSoakHeapRatio = 1.1         // heap after GC at the last checkpoint ≤ 1.1 × at the first
	TargetSoakRSS       = 150_000_000 // resident set at every checkpoint ≤ 150 MB
)

// The soak cases, in the order they run.
const (
	SoakHeadless  = "headless"
	SoakDashboard = "dashboard"
	SoakRecord    = "record"
	SoakAgent     = "agent"
	SoakEndless   = "endless"
)

// SoakCases are every case the soak bench knows.
var SoakCases = []string{SoakHeadless, SoakDashboard, SoakRecord, SoakAgent, SoakEndless}

// SoakOutputTokens is each request's length in the soak's finite cases,
// and SoakEndlessCut where the endless server cuts a stream.
const (
	SoakOutputTokens = 8192
	SoakEndlessCut   = 65536
)

// SoakPoint is one checkpoint of one case: the process's resident set and
// its heap after a GC, and the token events the server had sent by then.
type SoakPoint struct {
	Case   string        `json:"case"`
	At     time.Duration `json:"at_ns"`
	RSS    uint64        `json:"rss_bytes"`
	Heap   uint64        `json:"heap_bytes"`
	Tokens int64         `json:"tokens"`
}

// SoakConfig says what the soak bench runs.
type SoakConfig struct {
	Cases       []string
	Checkpoints []time.Duration // increasing offsets from a case's start
	// Parallel is how many cases run at once (default 1). Each case is its
	// own process, so their RSS stay apart, but they share the CPUs.
	Parallel int
	// RunCase runs one case and returns its checkpoints.
	RunCase func(ctx context.Context, name string, checkpoints []time.Duration) ([]SoakPoint, error)
}

// Validate reports the first problem with c, as a message fit for the user.
func (c SoakConfig) Validate() error {
	if len(c.Cases) == 0 {
		return errors.New("no cases to run")
	}
	for _, name := range c.Cases {
		if !knownSoakCase(name) {
			return fmt.Errorf("unknown case %q (want %s)", name, strings.Join(SoakCases, ", "))
		}
	}
	if err := validateCheckpoints(c.Checkpoints); err != nil {
		return err
	}
	if c.RunCase == nil {
		return errors.New("no way to run a case")
	}
	return nil
}

func knownSoakCase(name string) bool {
	for _, k := range SoakCases {
		if k == name {
			return true
		}
	}
	return false
}

func validateCheckpoints(cps []time.Duration) error {
	if len(cps) == 0 {
		return errors.New("checkpoints: need at least one")
	}
	for i, cp := range cps {
		if cp <= 0 || cp > 24*time.Hour {
			return fmt.Errorf("checkpoints: %s is not between 0 and 24h", cp)
		}
		if i > 0 && cp <= cps[i-1] {
			return fmt.Errorf("checkpoints must increase: %s after %s", cp, cps[i-1])
		}
	}
	return nil
}

// SoakResult is the outcome of a soak run.
type SoakResult struct {
	Checkpoints []time.Duration `json:"checkpoints_ns"`
	Cases       []SoakCase      `json:"cases"`
	Targets     []string        `json:"targets"`
	Met         bool            `json:"met"`
}

// SoakCase is one case's checkpoints and verdict.
type SoakCase struct {
	Name         string      `json:"name"`
	Points       []SoakPoint `json:"points"`
	TokensPerSec float64     `json:"tokens_per_sec"` // first to last checkpoint (start to it, with one)
	HeapRatio    float64     `json:"heap_ratio"`     // heap at the last checkpoint / at the first
	MaxRSS       uint64      `json:"max_rss_bytes"`
	Met          bool        `json:"met"`
	Error        string      `json:"error,omitempty"`
}

// RunSoak runs every case (Parallel at a time) and checks the targets.
func RunSoak(ctx context.Context, cfg SoakConfig) (SoakResult, error) {
	if err := cfg.Validate(); err != nil {
		return SoakResult{}, err
	}
	res := SoakResult{
		Checkpoints: cfg.Checkpoints,
		Cases:       make([]SoakCase, len(cfg.Cases)),
		Targets: []string{
			fmt.Sprintf("target: heap after GC at the last checkpoint ≤ %.1fx the first", TargetSoakHeapRatio),
			fmt.Sprintf("target: RSS ≤ %d MB at every checkpoint", TargetSoakRSS/1_000_000),
		},
		Met: true,
	}
	sem := make(chan struct{}, max(cfg.Parallel, 1))
	var wg sync.WaitGroup
	for i, name := range cfg.Cases {
		// Taken here, in order, so that the cases start in the order given.
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			res.Cases[i] = SoakCase{Name: name, Error: ctx.Err().Error()}
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			points, err := cfg.RunCase(ctx, name, cfg.Checkpoints)
			res.Cases[i] = judgeSoak(name, points, len(cfg.Checkpoints), err)
		})
	}
	wg.Wait()
	for _, c := range res.Cases {
		res.Met = res.Met && c.Met
	}
	return res, ctx.Err()
}

// judgeSoak checks one case's points against the targets.
func judgeSoak(name string, points []SoakPoint, want int, err error) SoakCase {
	c := SoakCase{Name: name, Points: points}
	if err != nil {
		c.Error = err.Error()
	} else if len(points) < want {
		c.Error = fmt.Sprintf("%d of %d checkpoints reported", len(points), want)
	}
	if len(points) == 0 {
		return c
	}
	first, last := points[0], points[len(points)-1]
	if first.Heap > 0 {
		c.HeapRatio = float64(last.Heap) / float64(first.Heap)
	}
	if span := (last.At - first.At).Seconds(); span > 0 {
		c.TokensPerSec = float64(last.Tokens-first.Tokens) / span
	} else if last.At > 0 {
		c.TokensPerSec = float64(last.Tokens) / last.At.Seconds() // one checkpoint: from the start
	}
	for _, p := range points {
		c.MaxRSS = max(c.MaxRSS, p.RSS)
	}
	c.Met = c.Error == "" && c.HeapRatio <= TargetSoakHeapRatio && c.MaxRSS <= TargetSoakRSS
	return c
}

// WriteSoakTable prints the result as a table: heap and RSS at each
// checkpoint, the heap's growth and the verdict.
func WriteSoakTable(w io.Writer, res SoakResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"case", "tok/s"}
	for _, cp := range res.Checkpoints {
		head = append(head, "heap@"+cp.String())
	}
	for _, cp := range res.Checkpoints {
		head = append(head, "rss@"+cp.String())
	}
	head = append(head, "heap last/first", "verdict")
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, c := range res.Cases {
		row := []string{c.Name, fmt.Sprintf("%.0f", c.TokensPerSec)}
		for i := range res.Checkpoints {
			row = append(row, pointMB(c.Points, i, func(p SoakPoint) uint64 { return p.Heap }))
		}
		for i := range res.Checkpoints {
			row = append(row, pointMB(c.Points, i, func(p SoakPoint) uint64 { return p.RSS }))
		}
		verdict := "PASS"
		if !c.Met {
			verdict = "MISSED"
		}
		row = append(row, fmt.Sprintf("%.2fx", c.HeapRatio), verdict)
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range res.Cases {
		if c.Error != "" {
			fmt.Fprintf(w, "%s: %s\n", c.Name, c.Error)
		}
	}
	for _, t := range res.Targets {
		fmt.Fprintln(w, t)
	}
	_, err := fmt.Fprintln(w, "heap and RSS in MB (10^6 bytes); heap is the live heap after a forced GC (the lowest of 8 readings over 1 s: what it keeps whatever is in flight)")
	return err
}

func pointMB(points []SoakPoint, i int, v func(SoakPoint) uint64) string {
	if i >= len(points) {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(v(points[i]))/1e6)
}

// ChildSoakCase runs each case in its own process: exe with args plus
// "--case NAME --checkpoints LIST", which must print one SoakPoint as a
// JSON line per checkpoint on stdout. Its own process gives each case its
// own resident set: in one process the first case's pages would stay
// mapped into the next's numbers.
func ChildSoakCase(exe string, args []string, stderr io.Writer) func(ctx context.Context, name string, checkpoints []time.Duration) ([]SoakPoint, error) {
	return func(ctx context.Context, name string, checkpoints []time.Duration) ([]SoakPoint, error) {
		argv := append(append([]string(nil), args...), "--case", name, "--checkpoints", FormatCheckpoints(checkpoints))
		cmd := exec.CommandContext(ctx, exe, argv...)
		cmd.Stderr = stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, fmt.Errorf("case %s: child stdout: %w", name, err)
		}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("case %s: start %s: %w", name, exe, err)
		}
		var points []SoakPoint
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var p SoakPoint
			if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
				continue // not a checkpoint line
			}
			points = append(points, p)
		}
		if err := cmd.Wait(); err != nil {
			return points, fmt.Errorf("case %s: %w", name, err)
		}
		return points, nil
	}
}

// FormatCheckpoints writes checkpoints as --checkpoints takes them.
func FormatCheckpoints(cps []time.Duration) string {
	s := make([]string, len(cps))
	for i, cp := range cps {
		s[i] = cp.String()
	}
	return strings.Join(s, ",")
}

// SoakCheckpoints measures the calling process at each checkpoint (offsets
// from start): it collects the garbage, reads the live heap (the lowest of
// readings readings, SoakHeapReadings for the bench) and the resident set,
// and calls emit. It returns after the last checkpoint, or
// when ctx ends.
func SoakCheckpoints(ctx context.Context, name string, start time.Time, checkpoints []time.Duration, readings int, tokens func() int64, emit func(SoakPoint)) error {
	for _, cp := range checkpoints {
		t := time.NewTimer(time.Until(start.Add(cp)))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		at := time.Since(start)
		n := tokens()
		heap := liveHeap(readings)
		rss, err := ReadRSS()
		if err != nil {
			return err
		}
		emit(SoakPoint{Case: name, At: at, RSS: rss, Heap: heap, Tokens: n})
	}
	return nil
}

// liveHeap is what the process keeps whatever it has in flight: the floor
// of n readings liveReadingGap apart, each the bytes the collection just forced
// found live (runtime/metrics' /gc/heap/live:bytes). MemStats' HeapAlloc
// read after runtime.GC also counts what the pipeline allocated since that
// collection ended, several MB at 300k token events/s. And a request in
// flight holds its token times until it ends: a 65,536-token stream of the
// endless case holds 1.5 MB, so two of them move one reading by up to 3 MB
// from one instant to the next. The readings span several such requests;
// the lowest is the retained state, which a leak raises as surely as it
// raises every reading.
func liveHeap(n int) uint64 {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	floor := uint64(0)
	for i := range max(n, 1) {
		if i > 0 {
			time.Sleep(liveReadingGap)
		}
		runtime.GC()
		metrics.Read(sample)
		if v := sample[0].Value.Uint64(); i == 0 || v < floor {
			floor = v
		}
	}
	return floor
}

// SoakHeapReadings readings liveReadingGap apart make one checkpoint's heap
// in the bench.
const (
	SoakHeapReadings = 8
	liveReadingGap   = 150 * time.Millisecond
)

// ReadRSS is this process's resident set (VmRSS in /proc/self/status).
func ReadRSS() (uint64, error) { return readStatusBytes("VmRSS") }

// ReadPeakRSS is this process's peak resident set so far (VmHWM in
// /proc/self/status).
func ReadPeakRSS() (uint64, error) { return readStatusBytes("VmHWM") }

// readStatusBytes reads one "NAME: N kB" line of /proc/self/status.
func readStatusBytes(name string) (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", name, err)
	}
	for line := range bytes.Lines(b) {
		rest, ok := bytes.CutPrefix(line, []byte(name+":"))
		if !ok {
			continue
		}
		f := strings.Fields(string(rest)) // "123456 kB"
		if len(f) != 2 || f[1] != "kB" {
			break
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			break
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("read %s: no such line in /proc/self/status", name)
}

// SoakServer is the soak's fast server on loopback: TTFT 0, ITL 0; every
// stream as long as asked or, endless, cut at SoakEndlessCut tokens.
type SoakServer struct {
	URL  string
	sent atomic.Int64
	srv  *http.Server
	done chan error
}

// StartSoakServer starts the server; Close stops it.
func StartSoakServer(endless bool) (*SoakServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("soak server: listen: %w", err)
	}
	s := &SoakServer{URL: "http://" + ln.Addr().String(), done: make(chan error, 1)}
	h := FastServer{Sent: &s.sent}
	if endless {
		h.Endless = SoakEndlessCut
	}
	s.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Tokens is how many token events the server has written.
func (s *SoakServer) Tokens() int64 { return s.sent.Load() }

// Close stops the server and its streams.
func (s *SoakServer) Close() error {
	err := s.srv.Close()
	if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	return err
}
