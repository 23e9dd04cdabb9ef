package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The throughput targets: the probe keeps up with the bare client, costs
// little more CPU per token, and allocates little per token event.
const (
	TargetEventsRatio   = 0.9  // probe events/s ≥ 0.9 × bare
	TargetCPURatio      = 1.25 // probe CPU per token ≤ 1.25 × bare
	TargetAllocPerToken = 64.0 // probe bytes allocated per token event
)

// ThroughputConfig says what the throughput bench runs.
type ThroughputConfig struct {
	Concurrency    []int
	TokensPerWrite []int
	// OutputTokens is the length of each streamed response.
	OutputTokens int
	// Duration is the length of one measured phase when Tokens is 0.
	Duration time.Duration
	// Tokens, when positive, ends a phase once this many token events have
	// been read instead (requests are not cut short; the last ones finish).
	Tokens int64
	// Rounds is how many measured phases each client gets per case; the
	// order of the clients alternates from round to round.
	Rounds int
	// Warmup is an unmeasured phase per client before each case.
	Warmup time.Duration
	// Clients are measured one after the other against the same server.
	Clients []ClientFactory
	// StartServer starts one server per TokensPerWrite value.
	StartServer ServerStarter
}

// Validate reports the first problem with c, as a message fit for the user.
func (c ThroughputConfig) Validate() error {
	if err := validateConcurrency(c.Concurrency); err != nil {
		return err
	}
	if len(c.TokensPerWrite) == 0 {
		return errors.New("tokens per write: need at least one value")
	}
	for _, n := range c.TokensPerWrite {
		if n < 1 || n > 4096 {
			return fmt.Errorf("tokens per write must be between 1 and 4096, got %d", n)
		}
	}
	switch {
	case c.OutputTokens < 1 || c.OutputTokens > 10_000_000:
		return fmt.Errorf("output tokens must be between 1 and 10000000, got %d", c.OutputTokens)
	case c.Tokens < 0:
		return fmt.Errorf("tokens must not be negative, got %d", c.Tokens)
	case c.Tokens == 0 && (c.Duration <= 0 || c.Duration > time.Hour):
		return fmt.Errorf("duration must be between 0 and 1h, got %s", c.Duration)
	case c.Rounds < 1 || c.Rounds > 1000:
		return fmt.Errorf("rounds must be between 1 and 1000, got %d", c.Rounds)
	case c.Warmup < 0 || c.Warmup > time.Hour:
		return fmt.Errorf("warmup must be between 0 and 1h, got %s", c.Warmup)
	case len(c.Clients) == 0:
		return errors.New("no clients to run")
	case c.StartServer == nil:
		return errors.New("no server to run against")
	}
	return nil
}

// ThroughputResult is the outcome of one throughput run.
type ThroughputResult struct {
	OutputTokens int              `json:"output_tokens"`
	Rounds       int              `json:"rounds"`
	PhaseSeconds float64          `json:"phase_seconds,omitempty"`
	PhaseTokens  int64            `json:"phase_tokens,omitempty"`
	Cases        []ThroughputCase `json:"cases"`
	Targets      []string         `json:"targets"`
	Met          bool             `json:"met"`
}

// ThroughputCase is one (concurrency, tokens per write) combination.
type ThroughputCase struct {
	Concurrency    int                `json:"concurrency"`
	TokensPerWrite int                `json:"tokens_per_write"`
	Clients        []ClientThroughput `json:"clients"`
	Ratio          *ThroughputRatio   `json:"ratio_probe_to_bare,omitempty"`
	Checks         []Check            `json:"checks,omitempty"`
}

// ClientThroughput is one client's totals over its measured phases.
type ClientThroughput struct {
	Client   string `json:"client"`
	Requests int64  `json:"requests"`
	// Failed counts requests that ended in error before the phase ended.
	Failed       int64   `json:"failed"`
	Events       int64   `json:"token_events"`
	WallSeconds  float64 `json:"wall_seconds"`
	EventsPerSec float64 `json:"events_per_sec"`
	// CPUUsPerToken is this process's user+system CPU per token event; the
	// server runs in another process, so this is the client's.
	CPUUsPerToken      float64 `json:"cpu_us_per_token"`
	AllocBytesPerToken float64 `json:"alloc_bytes_per_token"`
	MallocsPerToken    float64 `json:"mallocs_per_token"`
	FirstError         string  `json:"first_error,omitempty"`
}

// ThroughputRatio is probe/bare for each measure.
type ThroughputRatio struct {
	EventsPerSec  Ratio `json:"events_per_sec"`
	CPUPerToken   Ratio `json:"cpu_per_token"`
	AllocPerToken Ratio `json:"alloc_per_token"`
}

// Check is one target checked against one measured value.
type Check struct {
	Name   string `json:"name"`
	Target string `json:"target"`
	Value  string `json:"value"`
	Met    bool   `json:"met"`
}

// RunThroughput runs every case and returns the measurements.
func RunThroughput(ctx context.Context, cfg ThroughputConfig) (ThroughputResult, error) {
	if err := cfg.Validate(); err != nil {
		return ThroughputResult{}, err
	}
	res := ThroughputResult{
		OutputTokens: cfg.OutputTokens,
		Rounds:       cfg.Rounds,
		PhaseTokens:  cfg.Tokens,
		Targets: []string{
			fmt.Sprintf("target: probe token events/s ≥ %.1fx the bare client's", TargetEventsRatio),
			fmt.Sprintf("target: probe CPU per token ≤ %.2fx the bare client's", TargetCPURatio),
			fmt.Sprintf("target: probe allocates ≤ %.0f bytes per token event", TargetAllocPerToken),
		},
		Met: true,
	}
	if cfg.Tokens == 0 {
		res.PhaseSeconds = cfg.Duration.Seconds()
	}
	for _, tpw := range cfg.TokensPerWrite {
		cases, err := runServerCases(ctx, cfg, tpw)
		res.Cases = append(res.Cases, cases...)
		if err != nil {
			return res, err
		}
	}
	for _, c := range res.Cases {
		res.Met = res.Met && len(c.Checks) > 0 // no probe/bare pair: nothing was shown to meet anything
		for _, ch := range c.Checks {
			res.Met = res.Met && ch.Met
		}
	}
	return res, nil
}

// runServerCases starts one server and runs every concurrency level on it.
func runServerCases(ctx context.Context, cfg ThroughputConfig, tokensPerWrite int) ([]ThroughputCase, error) {
	baseURL, stop, err := cfg.StartServer(ctx, tokensPerWrite)
	if err != nil {
		return nil, fmt.Errorf("start server (%d tokens per write): %w", tokensPerWrite, err)
	}
	defer stop()
	clients := make([]Streamer, len(cfg.Clients))
	for i, f := range cfg.Clients {
		if clients[i], err = f.New(baseURL); err != nil {
			return nil, fmt.Errorf("new %s client: %w", f.Name, err)
		}
	}
	var cases []ThroughputCase
	for _, conc := range cfg.Concurrency {
		c := ThroughputCase{Concurrency: conc, TokensPerWrite: tokensPerWrite}
		totals := make([]phaseTotals, len(clients))
		if cfg.Warmup > 0 {
			for _, s := range clients {
				runPhase(ctx, s, conc, cfg.OutputTokens, cfg.Warmup, 0)
			}
		}
		order := make([]int, len(clients))
		for i := range order {
			order[i] = i
		}
		for round := range cfg.Rounds {
			if round > 0 {
				slices.Reverse(order) // alternate who goes first, so drift hits both
			}
			for _, i := range order {
				if err := ctx.Err(); err != nil {
					return cases, err
				}
				totals[i].add(runPhase(ctx, clients[i], conc, cfg.OutputTokens, cfg.Duration, cfg.Tokens))
			}
		}
		for i, f := range cfg.Clients {
			c.Clients = append(c.Clients, totals[i].result(f.Name))
		}
		c.Ratio, c.Checks = throughputChecks(c.Clients)
		cases = append(cases, c)
	}
	return cases, nil
}

// phaseStats is what one measured phase of one client saw and cost.
type phaseStats struct {
	requests, failed, events int64
	firstErr                 error
	cost                     usageDelta
}

type phaseTotals struct {
	requests, failed, events int64
	firstErr                 error
	wall, cpu                time.Duration
	cpuOK                    bool
	alloc, mallocs           uint64
	phases                   int
}

func (t *phaseTotals) add(p phaseStats) {
	t.requests += p.requests
	t.failed += p.failed
	t.events += p.events
	if t.firstErr == nil {
		t.firstErr = p.firstErr
	}
	t.wall += p.cost.wall
	t.cpu += p.cost.cpu
	t.cpuOK = p.cost.cpuOK && (t.phases == 0 || t.cpuOK)
	t.alloc += p.cost.alloc
	t.mallocs += p.cost.mallocs
	t.phases++
}

func (t *phaseTotals) result(name string) ClientThroughput {
	r := ClientThroughput{Client: name, Requests: t.requests, Failed: t.failed, Events: t.events, WallSeconds: t.wall.Seconds()}
	if t.firstErr != nil {
		r.FirstError = t.firstErr.Error()
	}
	if t.events > 0 {
		ev := float64(t.events)
		r.EventsPerSec = ev / t.wall.Seconds()
		if t.cpuOK {
			r.CPUUsPerToken = float64(t.cpu) / 1e3 / ev
		}
		r.AllocBytesPerToken = float64(t.alloc) / ev
		r.MallocsPerToken = float64(t.mallocs) / ev
	}
	return r
}

// runPhase keeps conc streams of outputTokens each going on s, for d, or
// until tokens events have been claimed when tokens > 0, and measures this
// process's CPU time and allocations meanwhile.
func runPhase(ctx context.Context, s Streamer, conc, outputTokens int, d time.Duration, tokens int64) phaseStats {
	var (
		pctx   context.Context
		cancel context.CancelFunc
	)
	if tokens > 0 {
		pctx, cancel = context.WithCancel(ctx)
	} else {
		pctx, cancel = context.WithTimeout(ctx, d)
	}
	defer cancel()

	var (
		claimed, events, requests, failed atomic.Int64
		errOnce                           sync.Once
		firstErr                          error
		wg                                sync.WaitGroup
	)
	// Collect the previous phase's garbage now, so this phase does not pay
	// for it.
	reqs := make([]StreamRequest, conc)
	for w := range reqs {
		reqs[w] = StreamRequest{ID: fmt.Sprintf("tp-%d", w), Prompt: "hi", PromptTokens: 1, OutputTokens: outputTokens}
	}
	runtime.GC()
	before := readUsage()
	for _, req := range reqs {
		wg.Go(func() {
			for pctx.Err() == nil {
				if tokens > 0 && claimed.Add(int64(outputTokens))-int64(outputTokens) >= tokens {
					return
				}
				tr := s.Stream(pctx, req)
				requests.Add(1)
				events.Add(int64(tr.Frames()))
				if tr.Err != nil && pctx.Err() == nil {
					failed.Add(1)
					errOnce.Do(func() { firstErr = tr.Err })
				}
			}
		})
	}
	wg.Wait()
	after := readUsage()
	return phaseStats{
		requests: requests.Load(), failed: failed.Load(), events: events.Load(),
		firstErr: firstErr, cost: after.since(before),
	}
}

// throughputChecks compares the client named "probe" with the one named
// "bare" against the three targets.
func throughputChecks(rows []ClientThroughput) (*ThroughputRatio, []Check) {
	var probe, bare *ClientThroughput
	for i := range rows {
		switch rows[i].Client {
		case "probe":
			probe = &rows[i]
		case "bare":
			bare = &rows[i]
		}
	}
	if probe == nil || bare == nil {
		return nil, nil
	}
	r := &ThroughputRatio{
		EventsPerSec:  Ratio(ratio(probe.EventsPerSec, bare.EventsPerSec)),
		CPUPerToken:   Ratio(ratio(probe.CPUUsPerToken, bare.CPUUsPerToken)),
		AllocPerToken: Ratio(ratio(probe.AllocBytesPerToken, bare.AllocBytesPerToken)),
	}
	checks := []Check{
		{Name: "events/s", Target: fmt.Sprintf("≥ %.1fx bare", TargetEventsRatio), Value: r.EventsPerSec.String(),
			Met: r.EventsPerSec.Valid() && float64(r.EventsPerSec) >= TargetEventsRatio},
		{Name: "CPU/token", Target: fmt.Sprintf("≤ %.2fx bare", TargetCPURatio), Value: r.CPUPerToken.String(),
			Met: r.CPUPerToken.Valid() && float64(r.CPUPerToken) <= TargetCPURatio},
		{Name: "alloc/token", Target: fmt.Sprintf("≤ %.0f B", TargetAllocPerToken), Value: fmt.Sprintf("%.1f B", probe.AllocBytesPerToken),
			Met: probe.Events > 0 && probe.AllocBytesPerToken <= TargetAllocPerToken},
	}
	return r, checks
}
