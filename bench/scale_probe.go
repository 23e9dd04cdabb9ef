package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/session"
)

// Model is the model name the benches send; their servers accept any.
const Model = "latscope-bench"

// loopbackOptions are the session `run --no-tui` opens against a bench
// server: no metrics scrape, no GPU (the server has neither), 16-token
// prompts, seed 1; a closed loop of streams, or an open one at rate on a
// fixed schedule. A zero duration runs until stopped.
func loopbackOptions(target string, streams int, rate float64, outputTokens int, duration, drain, timeout time.Duration) (session.Options, error) {
	prompt, err := probe.ParseLength("16")
	if err != nil {
		return session.Options{}, err
	}
	output, err := probe.ParseLength(fmt.Sprint(outputTokens))
	if err != nil {
		return session.Options{}, err
	}
	auth, err := probe.AuthHeader("", nil)
	if err != nil {
		return session.Options{}, err
	}
	arrival, header := probe.ArrivalPoisson, event.Load{Mode: "closed", Concurrency: streams}
	if rate > 0 {
		arrival, header = probe.ArrivalConstant, event.Load{Mode: "open", Rate: rate, Arrival: probe.ArrivalConstant, Burstiness: 1}
	}
	header.PromptTokens, header.OutputTokens, header.Duration, header.Seed = "16", fmt.Sprint(outputTokens), duration, 1
	return session.Options{
		Conn:    &session.Connection{Target: target, Shown: event.RedactURL(target), Auth: auth, Timeout: min(timeout, 10*time.Second)},
		Dialect: "openai-chat", Model: Model,
		Prompts: probe.PromptConfig{PromptTokens: prompt, OutputTokens: output},
		Load: probe.LoadConfig{
			Concurrency: streams, Rate: rate, Arrival: arrival, Burstiness: 1,
			Duration: duration, Drain: drain, Seed: 1,
		},
		LoadHeader:    header,
		Offered:       rate,
		MaxEventBytes: probe.DefaultMaxEventBytes,
		Timeout:       timeout,
		Metrics:       session.Metrics{Off: true},
		GPU:           session.GPU{Off: true},
	}, nil
}

// StartCPUProfile profiles this process's CPU into path until stop; with
// no path it profiles nothing (stop does nothing).
func StartCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// DriveScaleProbe is the scale bench's probe: the session and pipeline as
// `run --no-tui` builds them (no metrics scrape, no GPU: the server has
// neither), closed loop at spec.Streams (or open at spec.Rate), with one
// more consumer that writes each request's frames to the log. It returns
// the run summary's verdict on the probe.
func DriveScaleProbe(ctx context.Context, spec ScaleSpec, runFor time.Duration, clock Clock, log *FrameLogWriter) (*ProbeHealth, error) {
	rate := 0.0
	if spec.Rate > 0 { // on the bare client's schedule: one request every 1/rate
		rate = spec.Rate
	}
	o, err := loopbackOptions(spec.URL, spec.Streams, rate, spec.OutputTokens, runFor, spec.Drain, runFor+spec.Drain)
	if err != nil {
		return nil, err
	}
	session.TuneGC(o.Load) // as run does: this child process is the probe's alone
	s, err := session.Open(ctx, io.Discard, o)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	m := session.Measurement{
		Pipe:      s.PipelineConfig(),
		Agg:       aggregate.Config{Now: time.Now, OfferedRate: s.Offered},
		Consumers: []session.Consumer{frameTap{clock: clock, log: log}},
	}
	summary, _, err := m.Run(ctx)
	if err != nil {
		return nil, err
	}
	health := &ProbeHealth{State: string(summary.Verdict.State), Reason: summary.Verdict.Reason}
	if summary.Requests.OK == 0 {
		return health, errors.Join(session.AllRequestsFailed(summary), ctx.Err())
	}
	return health, ctx.Err()
}

// frameTap writes every request the pipeline carries to a frame log.
type frameTap struct {
	clock Clock
	log   *FrameLogWriter
}

func (t frameTap) Start(_ context.Context, fan *pipeline.Fanout) func() error {
	sub := fan.Subscribe("scale-frames", 4096, pipeline.Lossless)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range sub.Events() {
			if r := ev.Request; r != nil && !r.Warmup {
				t.log.Write(ProbeFrameLog(t.clock, r))
			}
		}
	}()
	return func() error {
		<-done
		return nil
	}
}
