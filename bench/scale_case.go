package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/latscope/latscope/probe"
)

// The scale bench's two clients.
const (
	ScaleProbe = "probe"
	ScaleBare  = "bare"
)

// ScaleSpec is one measured phase of the scale bench: one client at one
// number of streams, against one server, in a process of its own.
type ScaleSpec struct {
	Client  string // ScaleProbe or ScaleBare
	URL     string
	Streams int
	// Rate, when set, makes the phase an open loop: requests at Rate per
	// second on a fixed schedule, Streams of them in flight on average.
	Rate         float64
	Warmup       time.Duration // streams run, unmeasured, this long first
	Duration     time.Duration // then the measured window
	Drain        time.Duration // then requests in flight may finish for this long
	OutputTokens int
	// LogPath is the file the client writes its FrameLogs to.
	LogPath string
	// CPUProfile, when set, is where the child writes its CPU profile.
	CPUProfile string
}

// ScaleRun is what the child process of one phase reports about itself.
// Window is the measured window on the Clock's shared time line.
type ScaleRun struct {
	Client      string `json:"client"`
	Streams     int    `json:"streams"`
	WindowStart int64  `json:"window_start_ns"`
	WindowEnd   int64  `json:"window_end_ns"`
	// PeakRSS is VmHWM when the run ended, EndRSS VmRSS at the end of the
	// measured window (every stream still open).
	PeakRSS uint64 `json:"peak_rss_bytes"`
	EndRSS  uint64 `json:"end_rss_bytes"`
	// CPU is this process's user+system CPU time over the window; 0 where
	// it could not be read.
	CPU       time.Duration `json:"cpu_ns"`
	FileLimit uint64        `json:"file_limit"`
	// Probe is the probe's own verdict on whether it kept pace over the
	// phase (nil for the bare client, which has none).
	Probe *ProbeHealth `json:"probe,omitempty"`
}

// ProbeHealth is the probe's verdict on itself over one phase, as its run
// summary states it: whether it kept pace or was the limit, and why.
type ProbeHealth struct {
	State  string `json:"state"` // kept_pace, paused, held or unknown
	Reason string `json:"reason,omitempty"`
}

// The probe health states, worst last (as aggregate.ProbeState says them).
var probeStates = []string{"unknown", "kept_pace", "paused", "held"}

// worse reports whether h is a worse verdict than o (nil is the best).
func (h *ProbeHealth) worse(o *ProbeHealth) bool {
	if h == nil {
		return false
	}
	if o == nil {
		return true
	}
	return slices.Index(probeStates, h.State) > slices.Index(probeStates, o.State)
}

// Held reports whether the probe said it was the limit.
func (h *ProbeHealth) Held() bool { return h != nil && h.State == "held" }

// fileMargin is how many descriptors a child needs besides one per stream:
// the runtime's, the log, the setup connections.
const fileMargin = 64

// ScaleDriver runs a client for runFor with spec.Streams streams, then
// lets the requests in flight finish (spec.Drain), writing each finished
// request to log on the clock's time line. The probe's driver returns its
// verdict on itself; the bare client's returns nil.
type ScaleDriver func(ctx context.Context, spec ScaleSpec, runFor time.Duration, clock Clock, log *FrameLogWriter) (*ProbeHealth, error)

// RunScaleCase is the child side of one phase: it raises the open-file
// limit, runs drive, measures this process around the window, and returns
// what it measured.
func RunScaleCase(ctx context.Context, spec ScaleSpec, drive ScaleDriver) (ScaleRun, error) {
	run := ScaleRun{Client: spec.Client, Streams: spec.Streams}
	limit, err := RaiseFileLimit()
	run.FileLimit = limit
	if limit > 0 && limit < uint64(spec.Streams+fileMargin) {
		why := "even raised to its hard limit"
		if err != nil {
			why = err.Error()
		}
		return run, fmt.Errorf("%d streams need about %d open files and the limit is %d (%s): raise the hard limit (ulimit -Hn, or LimitNOFILE= under systemd) or run fewer streams",
			spec.Streams, spec.Streams+fileMargin, limit, why)
	}
	f, err := os.Create(spec.LogPath)
	if err != nil {
		return run, fmt.Errorf("frame log: %w", err)
	}
	log := NewFrameLogWriter(f)
	clock := NewClock()
	start := time.Now()
	run.WindowStart = clock.Nanos(start.Add(spec.Warmup))
	run.WindowEnd = clock.Nanos(start.Add(spec.Warmup + spec.Duration))

	mctx, stopMeasuring := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var cpuErr error
	wg.Go(func() { run.CPU, run.EndRSS, cpuErr = measureWindow(mctx, start, spec.Warmup, spec.Duration) })
	var runErr error
	run.Probe, runErr = drive(ctx, spec, spec.Warmup+spec.Duration, clock, log)
	stopMeasuring()
	wg.Wait()
	if cpuErr != nil && !errors.Is(cpuErr, context.Canceled) {
		runErr = errors.Join(runErr, cpuErr)
	}
	run.PeakRSS, err = ReadPeakRSS()
	return run, errors.Join(runErr, err, log.Close(), f.Close())
}

// measureWindow reads the process's CPU time at the window's two edges and
// its resident set at the end.
func measureWindow(ctx context.Context, start time.Time, warmup, d time.Duration) (cpu time.Duration, rss uint64, err error) {
	if err := sleepUntilCtx(ctx, start.Add(warmup)); err != nil {
		return 0, 0, err
	}
	before, cpuErr := processCPU()
	if err := sleepUntilCtx(ctx, start.Add(warmup+d)); err != nil {
		return 0, 0, err
	}
	after, cpuErr2 := processCPU()
	if cpuErr == nil && cpuErr2 == nil {
		cpu = after - before
	}
	rss, err = ReadRSS()
	return cpu, rss, err
}

func sleepUntilCtx(ctx context.Context, t time.Time) error {
	if !sleepUntil(ctx, t) {
		return ctx.Err()
	}
	return nil
}

// scalePromptWords is the prompt length both clients send.
const scalePromptWords = 16

// DriveBare is the ScaleDriver of the bare client: in a closed loop,
// spec.Streams goroutines on one transport, each sending a request as soon
// as its last one ended; in an open loop (spec.Rate), a request every
// 1/Rate seconds, each on a goroutine of its own, at most
// probe.DefaultMaxInFlight at once as the probe's open loop allows (past
// it a request goes out late, as the probe's does).
func DriveBare(model string) ScaleDriver {
	return func(ctx context.Context, spec ScaleSpec, runFor time.Duration, clock Clock, log *FrameLogWriter) (*ProbeHealth, error) {
		c := NewBareClient(spec.URL, model, &http.Client{Transport: NewPlainTransport()})
		stopAt := time.Now().Add(runFor)
		prompt := BuildPrompt(scalePromptWords)
		send := func(id string) {
			// A request that starts before stopAt may run into the drain.
			rctx, cancel := context.WithDeadline(ctx, stopAt.Add(spec.Drain))
			tr := c.Stream(rctx, StreamRequest{ID: id, Prompt: prompt, PromptTokens: scalePromptWords, OutputTokens: spec.OutputTokens})
			cut := errors.Is(rctx.Err(), context.DeadlineExceeded)
			cancel()
			log.Write(TraceFrameLog(clock, id, tr, cut))
		}
		var wg sync.WaitGroup
		if spec.Rate > 0 {
			every := time.Duration(float64(time.Second) / spec.Rate)
			slots := make(chan struct{}, probe.DefaultMaxInFlight)
			next := time.Now()
			for seq := 0; ctx.Err() == nil && next.Before(stopAt); seq++ {
				if !sleepUntil(ctx, next) {
					break
				}
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
				}
				if ctx.Err() != nil {
					break
				}
				id := "bare-" + strconv.Itoa(seq)
				wg.Go(func() {
					defer func() { <-slots }()
					send(id)
				})
				next = next.Add(every)
			}
			wg.Wait()
			return nil, ctx.Err()
		}
		for w := range spec.Streams {
			wg.Go(func() {
				for seq := 0; ctx.Err() == nil && time.Now().Before(stopAt); seq++ {
					send("bare-" + strconv.Itoa(w) + "-" + strconv.Itoa(seq))
				}
			})
		}
		wg.Wait()
		return nil, ctx.Err()
	}
}

// ScaleCaseArgs are the arguments that tell the child which phase to run
// (see ChildScaleCase).
func ScaleCaseArgs(spec ScaleSpec) []string {
	return []string{
		"--client", spec.Client, "--url", spec.URL, "--streams", strconv.Itoa(spec.Streams),
		"--rate", strconv.FormatFloat(spec.Rate, 'g', -1, 64),
		"--warmup", spec.Warmup.String(), "--duration", spec.Duration.String(), "--drain", spec.Drain.String(),
		"--output-tokens", strconv.Itoa(spec.OutputTokens), "--log", spec.LogPath,
		"--cpu-profile", spec.CPUProfile,
	}
}

// ChildScaleCase runs each phase in a process of its own, launched with
// ScaleCaseArgs; the child prints its ScaleRun as one JSON line on stdout.
// Its own process gives each phase its own resident set and CPU time.
func ChildScaleCase(launch Launcher, stderr io.Writer) func(ctx context.Context, spec ScaleSpec) (ScaleRun, error) {
	return func(ctx context.Context, spec ScaleSpec) (ScaleRun, error) {
		cmd := launch(ScaleCaseArgs(spec)...)
		var said lastLine // the child's own account of a failure
		cmd.Stderr = io.MultiWriter(stderr, &said)
		out, err := cmd.StdoutPipe()
		if err != nil {
			return ScaleRun{}, fmt.Errorf("child stdout: %w", err)
		}
		if err := cmd.Start(); err != nil {
			return ScaleRun{}, fmt.Errorf("start %s: %w", cmd.Path, err)
		}
		// The child ends with its run; ctx ending kills it.
		stopKill := context.AfterFunc(ctx, func() { cmd.Process.Kill() })
		defer stopKill()
		var run ScaleRun
		found := false
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if json.Unmarshal(sc.Bytes(), &run) == nil && run.Client != "" {
				found = true
			}
		}
		if err := cmd.Wait(); err != nil {
			if line := said.String(); line != "" {
				return run, fmt.Errorf("child: %w: %s", err, line)
			}
			return run, fmt.Errorf("child: %w", err)
		}
		if !found {
			return run, errors.New("child printed no result")
		}
		return run, nil
	}
}

// lastLine keeps the last non-empty line written to it (at most
// maxLastLine bytes of it).
type lastLine struct {
	mu   sync.Mutex
	cur  []byte
	last string
}

const maxLastLine = 1024

func (l *lastLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range p {
		if c == '\n' {
			if line := strings.TrimSpace(string(l.cur)); line != "" {
				l.last = line
			}
			l.cur = l.cur[:0]
			continue
		}
		if len(l.cur) < maxLastLine {
			l.cur = append(l.cur, c)
		}
	}
	return len(p), nil
}

func (l *lastLine) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if line := strings.TrimSpace(string(l.cur)); line != "" {
		return line
	}
	return l.last
}

// Validate checks a spec as its flags give it, naming the flag to change.
func (spec ScaleSpec) Validate() error {
	switch {
	case spec.URL == "" || spec.LogPath == "":
		return errors.New("--url and --log are required")
	case spec.Streams < 1:
		return fmt.Errorf("--streams %d: want 1 or more", spec.Streams)
	case spec.Rate < 0 || math.IsNaN(spec.Rate) || math.IsInf(spec.Rate, 0):
		return fmt.Errorf("--rate %g: want 0 (closed loop) or a positive rate", spec.Rate)
	case spec.Duration <= 0 || spec.Warmup < 0 || spec.Drain < 0:
		return errors.New("--duration must be positive, --warmup and --drain not negative")
	case spec.OutputTokens < 1:
		return fmt.Errorf("--output-tokens %d: want 1 or more", spec.OutputTokens)
	}
	return nil
}
