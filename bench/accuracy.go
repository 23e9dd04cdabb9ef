package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// AccuracyTargetRatio is the most the probe's |error| may exceed the bare
// client's, on the mean and on p99, at AccuracyTargetConcurrency.
const (
	AccuracyTargetRatio       = 1.2
	AccuracyTargetConcurrency = 64
)

// SimStarter starts the server the accuracy bench measures against. The
// server must call truth.Record right after it flushes each content frame.
// stop shuts it down.
type SimStarter func(ctx context.Context, truth *GroundTruth) (baseURL string, stop func() error, err error)

// AccuracyConfig says what the accuracy bench runs.
type AccuracyConfig struct {
	// Profile names the simulator profile (used by the default StartServer
	// and recorded in the result).
	Profile string
	// Concurrency lists the levels to run, one after the other.
	Concurrency []int
	// Requests is the number of requests per client at each level; 0 picks
	// max(8, 2×concurrency).
	Requests     int
	PromptTokens int
	OutputTokens int
	// Timeout bounds one request.
	Timeout time.Duration
	// Clients are run side by side, interleaved request by request. The
	// ratios compare the one named "probe" with the one named "bare".
	Clients []ClientFactory
	// StartServer starts the simulator; it must be set (see SimServer).
	StartServer SimStarter
}

// Validate reports the first problem with c, as a message fit for the user.
func (c AccuracyConfig) Validate() error {
	if err := validateConcurrency(c.Concurrency); err != nil {
		return err
	}
	switch {
	case c.Requests < 0 || c.Requests > 1_000_000:
		return fmt.Errorf("requests must be between 0 (auto) and 1000000, got %d", c.Requests)
	case c.PromptTokens < 1 || c.PromptTokens > 1_000_000:
		return fmt.Errorf("prompt tokens must be between 1 and 1000000, got %d", c.PromptTokens)
	case c.OutputTokens < 2 || c.OutputTokens > 1_000_000:
		return fmt.Errorf("output tokens must be between 2 and 1000000 (ITL needs two frames), got %d", c.OutputTokens)
	case c.Timeout <= 0:
		return fmt.Errorf("timeout must be positive, got %s", c.Timeout)
	case len(c.Clients) == 0:
		return errors.New("no clients to run")
	case c.StartServer == nil:
		return errors.New("no server to run against")
	}
	return nil
}

func validateConcurrency(levels []int) error {
	if len(levels) == 0 {
		return errors.New("concurrency: need at least one level")
	}
	for _, n := range levels {
		if n < 1 || n > 4096 {
			return fmt.Errorf("concurrency must be between 1 and 4096, got %d", n)
		}
	}
	return nil
}

// AccuracyResult is the outcome of one accuracy run.
type AccuracyResult struct {
	Profile      string          `json:"profile"`
	PromptTokens int             `json:"prompt_tokens"`
	OutputTokens int             `json:"output_tokens"`
	Levels       []AccuracyLevel `json:"levels"`
	Target       TargetCheck     `json:"target"`
}

// AccuracyLevel is one concurrency level's results.
type AccuracyLevel struct {
	Concurrency int              `json:"concurrency"`
	Clients     []ClientAccuracy `json:"clients"`
	// Ratio is probe/bare for each statistic; nil without both clients.
	Ratio *AccuracyRatio `json:"ratio_probe_to_bare,omitempty"`
}

// ClientAccuracy is one client's timing error at one level.
type ClientAccuracy struct {
	Client   string `json:"client"`
	Requests int    `json:"requests"`
	Failed   int    `json:"failed"`
	// Mismatched counts requests where the client and the server disagree on
	// the number of content frames (only the common frames are compared).
	Mismatched int        `json:"frame_count_mismatch"`
	TTFT       ErrorStats `json:"ttft_abs_error"`
	ITL        ErrorStats `json:"itl_abs_error"`
	FirstError string     `json:"first_error,omitempty"`
}

// AccuracyRatio holds probe/bare for the mean and p99 of each |error|.
type AccuracyRatio struct {
	TTFTMean Ratio `json:"ttft_mean"`
	TTFTP99  Ratio `json:"ttft_p99"`
	ITLMean  Ratio `json:"itl_mean"`
	ITLP99   Ratio `json:"itl_p99"`
}

// TargetCheck says whether the run met its stated target.
type TargetCheck struct {
	Text   string   `json:"text"`
	Met    bool     `json:"met"`
	Missed []string `json:"missed,omitempty"`
}

// RunAccuracy starts the simulator once, runs every concurrency level with
// all clients interleaved, and compares each client's frame arrival times
// with the simulator's flush times.
func RunAccuracy(ctx context.Context, cfg AccuracyConfig) (AccuracyResult, error) {
	if err := cfg.Validate(); err != nil {
		return AccuracyResult{}, err
	}
	truth := NewGroundTruth()
	baseURL, stop, err := cfg.StartServer(ctx, truth)
	if err != nil {
		return AccuracyResult{}, fmt.Errorf("start simulator: %w", err)
	}
	defer stop()

	clients := make([]Streamer, len(cfg.Clients))
	for i, f := range cfg.Clients {
		if clients[i], err = f.New(baseURL); err != nil {
			return AccuracyResult{}, fmt.Errorf("new %s client: %w", f.Name, err)
		}
	}
	res := AccuracyResult{Profile: cfg.Profile, PromptTokens: cfg.PromptTokens, OutputTokens: cfg.OutputTokens}
	prompt := BuildPrompt(cfg.PromptTokens)

	// One request per client first, so connection set-up and first-use costs
	// fall outside the statistics.
	warm := runInterleaved(ctx, clients, 1, len(clients), cfg, prompt, "warm")
	for _, w := range warm {
		if w.trace.Err != nil {
			return res, fmt.Errorf("warm-up %s request: %w", cfg.Clients[w.client].Name, w.trace.Err)
		}
	}
	for _, conc := range cfg.Concurrency {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		perClient := cfg.Requests
		if perClient == 0 {
			perClient = max(8, 2*conc)
		}
		jobs := runInterleaved(ctx, clients, conc, perClient*len(clients), cfg, prompt, fmt.Sprintf("acc-c%d", conc))
		res.Levels = append(res.Levels, scoreLevel(conc, cfg.Clients, jobs, truth))
	}
	res.Target = checkAccuracyTarget(res.Levels)
	return res, ctx.Err()
}

type accuracyJob struct {
	id     string
	client int
	trace  Trace
}

// runInterleaved runs n requests on conc workers. Request j goes to client
// j mod len(clients), so at any moment every client has about the same share
// of the streams in flight and sees the same server load.
func runInterleaved(ctx context.Context, clients []Streamer, conc, n int, cfg AccuracyConfig, prompt, prefix string) []accuracyJob {
	jobs := make([]accuracyJob, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(conc, n) {
		wg.Go(func() {
			for {
				j := int(next.Add(1) - 1)
				if j >= n || ctx.Err() != nil {
					return
				}
				job := accuracyJob{id: fmt.Sprintf("%s-%06d", prefix, j), client: j % len(clients)}
				rctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
				job.trace = clients[job.client].Stream(rctx, StreamRequest{
					ID: job.id, Prompt: prompt, PromptTokens: cfg.PromptTokens, OutputTokens: cfg.OutputTokens,
				})
				cancel()
				jobs[j] = job
			}
		})
	}
	wg.Wait()
	return jobs
}

// scoreLevel turns one level's traces into per-client error statistics.
func scoreLevel(conc int, factories []ClientFactory, jobs []accuracyJob, truth *GroundTruth) AccuracyLevel {
	type acc struct {
		ttft, itl []time.Duration
		row       ClientAccuracy
	}
	per := make([]acc, len(factories))
	for i, f := range factories {
		per[i].row.Client = f.Name
	}
	for _, job := range jobs {
		if job.id == "" { // never ran: the run was cancelled
			continue
		}
		a := &per[job.client]
		a.row.Requests++
		if job.trace.Err != nil {
			a.row.Failed++
			if a.row.FirstError == "" {
				a.row.FirstError = job.trace.Err.Error()
			}
			continue
		}
		server := contiguous(truth.Frames(job.id))
		arrivals := make([]time.Duration, job.trace.Frames())
		for i := range arrivals {
			arrivals[i] = job.trace.At(i)
		}
		if len(arrivals) != len(server) {
			a.row.Mismatched++
		}
		ttft, itl, ok := FrameErrors(job.trace.Start, arrivals, server)
		if !ok {
			continue
		}
		a.ttft = append(a.ttft, ttft)
		a.itl = append(a.itl, itl...)
	}
	level := AccuracyLevel{Concurrency: conc}
	for i := range per {
		per[i].row.TTFT = SummarizeAbs(per[i].ttft)
		per[i].row.ITL = SummarizeAbs(per[i].itl)
		level.Clients = append(level.Clients, per[i].row)
	}
	probe, bare := findClient(level.Clients, "probe"), findClient(level.Clients, "bare")
	if probe != nil && bare != nil {
		level.Ratio = &AccuracyRatio{
			TTFTMean: Ratio(ratio(probe.TTFT.MeanUs, bare.TTFT.MeanUs)),
			TTFTP99:  Ratio(ratio(probe.TTFT.P99Us, bare.TTFT.P99Us)),
			ITLMean:  Ratio(ratio(probe.ITL.MeanUs, bare.ITL.MeanUs)),
			ITLP99:   Ratio(ratio(probe.ITL.P99Us, bare.ITL.P99Us)),
		}
	}
	return level
}

// contiguous cuts the server's frames at the first one never recorded.
func contiguous(frames []time.Time) []time.Time {
	for i, t := range frames {
		if t.IsZero() {
			return frames[:i]
		}
	}
	return frames
}

func findClient(rows []ClientAccuracy, name string) *ClientAccuracy {
	for i := range rows {
		if rows[i].Client == name {
			return &rows[i]
		}
	}
	return nil
}

// checkAccuracyTarget checks the ratios at concurrency 64, or at the highest
// level run when 64 was not.
func checkAccuracyTarget(levels []AccuracyLevel) TargetCheck {
	tc := TargetCheck{Text: fmt.Sprintf("target: probe within %.1fx of bare client on mean and p99 |error| at concurrency %d",
		AccuracyTargetRatio, AccuracyTargetConcurrency)}
	var at *AccuracyLevel
	for i := range levels {
		if at == nil || levels[i].Concurrency > at.Concurrency {
			at = &levels[i]
		}
	}
	for i := range levels {
		if levels[i].Concurrency == AccuracyTargetConcurrency {
			at = &levels[i]
		}
	}
	if at == nil || at.Ratio == nil {
		tc.Missed = append(tc.Missed, "no probe/bare pair was measured")
		return tc
	}
	if at.Concurrency != AccuracyTargetConcurrency {
		tc.Text += fmt.Sprintf(" (checked at %d, the highest level run)", at.Concurrency)
	}
	for _, r := range []struct {
		name string
		v    Ratio
	}{{"TTFT mean", at.Ratio.TTFTMean}, {"TTFT p99", at.Ratio.TTFTP99}, {"ITL mean", at.Ratio.ITLMean}, {"ITL p99", at.Ratio.ITLP99}} {
		if !r.v.Valid() || float64(r.v) > AccuracyTargetRatio {
			tc.Missed = append(tc.Missed, fmt.Sprintf("%s %s", r.name, r.v))
		}
	}
	tc.Met = len(tc.Missed) == 0
	return tc
}

// BuildPrompt returns a prompt of about n words, each of which common
// tokenizers (and the simulator) count as one token.
func BuildPrompt(n int) string {
	words := [...]string{"the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog"}
	var b strings.Builder
	b.Grow(n * 6)
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[i%len(words)])
	}
	return b.String()
}
