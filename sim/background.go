package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Background is traffic the simulator makes for itself: "users" whose
// requests go through the same front end, queue and engine as a client's,
// and show in the metrics and the traces, but not in OnFinish. It lets a
// monitor of real traffic (latscope watch) run against the simulator, with
// its truth at BackgroundTruthPath.
type Background struct {
	// Rate is the mean arrival rate, in requests per second (Poisson
	// arrivals); 0: no background traffic.
	Rate float64
	// PromptTokens and OutputTokens are the mean lengths; each request
	// draws its own, uniformly within ±50% (a mix of short and long).
	// 0: 256 and 128.
	PromptTokens, OutputTokens int
	// MaxInFlight bounds the background requests at the server at once;
	// arrivals beyond it are counted as dropped and not sent. 0: 4096.
	MaxInFlight int
}

// BackgroundTruthPath serves the background traffic's ground truth
// (BackgroundTruth) as JSON.
const BackgroundTruthPath = "/latscope/truth/background"

// Background's defaults.
const (
	defaultBackgroundPrompt   = 256
	defaultBackgroundOutput   = 128
	defaultBackgroundInFlight = 4096
)

// BackgroundTruth is the true time the requests spent in each engine
// phase, summed, in vLLM's definitions (those of its histograms): queue is
// queued → scheduled, prefill scheduled → first token, decode first → last
// token, e2e arrival → the last token's pickup by the front end. Only the
// requests that produced a token count, as in the histograms.
type BackgroundTruth struct {
	// Background is the simulator's own traffic; All every request the
	// engine finished (the background's, and any client's).
	Background PhaseTotals `json:"background"`
	All        PhaseTotals `json:"all"`
	// Sent and Dropped count the background arrivals sent and those not
	// sent because MaxInFlight were at the server.
	Sent    int64 `json:"sent"`
	Dropped int64 `json:"dropped"`
}

// PhaseTotals sums requests' phases, in seconds.
type PhaseTotals struct {
	Requests       int64   `json:"requests"`
	QueueSeconds   float64 `json:"queue_s"`
	PrefillSeconds float64 `json:"prefill_s"`
	DecodeSeconds  float64 `json:"decode_s"`
	E2ESeconds     float64 `json:"e2e_s"`
	PromptTokens   int64   `json:"prompt_tokens"`
	OutputTokens   int64   `json:"output_tokens"`
}

func (p *PhaseTotals) add(queue, prefill, decode, e2e time.Duration, prompt, output int) {
	p.Requests++
	p.QueueSeconds += queue.Seconds()
	p.PrefillSeconds += prefill.Seconds()
	p.DecodeSeconds += decode.Seconds()
	p.E2ESeconds += e2e.Seconds()
	p.PromptTokens += int64(prompt)
	p.OutputTokens += int64(output)
}

// phaseTruth accumulates BackgroundTruth.
type phaseTruth struct {
	mu sync.Mutex
	t  BackgroundTruth
	// changed is closed (and replaced) when a request is recorded.
	changed chan struct{}
}

// waitFor returns the truth once ok accepts it, or false when ctx ends
// first.
func (pt *phaseTruth) waitFor(ctx context.Context, ok func(BackgroundTruth) bool) (BackgroundTruth, bool) {
	for {
		pt.mu.Lock()
		t := pt.t
		if pt.changed == nil {
			pt.changed = make(chan struct{})
		}
		ch := pt.changed
		pt.mu.Unlock()
		if ok(t) {
			return t, true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return t, false
		}
	}
}

// record adds one finished request's phases. Runs on the loop.
func (pt *phaseTruth) record(background bool, queue, prefill, decode, e2e time.Duration, prompt, output int) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.t.All.add(queue, prefill, decode, e2e, prompt, output)
	if background {
		pt.t.Background.add(queue, prefill, decode, e2e, prompt, output)
	}
	if pt.changed != nil {
		close(pt.changed)
		pt.changed = nil
	}
}

func (pt *phaseTruth) counted(sent bool) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if sent {
		pt.t.Sent++
	} else {
		pt.t.Dropped++
	}
}

func (pt *phaseTruth) snapshot() BackgroundTruth {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.t
}

// BackgroundTruth returns the truth so far.
func (s *Server) BackgroundTruth() BackgroundTruth { return s.phases.snapshot() }

// WaitBackground returns the truth once ok accepts it (checked after each
// finished request), or the latest and false when ctx ends first.
func (s *Server) WaitBackground(ctx context.Context, ok func(BackgroundTruth) bool) (BackgroundTruth, bool) {
	return s.phases.waitFor(ctx, ok)
}

func (s *Server) handleBackgroundTruth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s.phases.snapshot())
}

func (b Background) withDefaults() Background {
	if b.PromptTokens == 0 {
		b.PromptTokens = defaultBackgroundPrompt
	}
	if b.OutputTokens == 0 {
		b.OutputTokens = defaultBackgroundOutput
	}
	if b.MaxInFlight == 0 {
		b.MaxInFlight = defaultBackgroundInFlight
	}
	return b
}

// validate names each problem by the sim command's flag that sets it.
func (b Background) validate() []error {
	var errs []error
	if !(b.Rate >= 0 && b.Rate <= 1e6) {
		errs = append(errs, fmt.Errorf("background-rate %v: want 0 to 1e6 requests per second", b.Rate))
	}
	for _, v := range []struct {
		name  string
		value int
	}{{"background-prompt-tokens", b.PromptTokens}, {"background-output-tokens", b.OutputTokens}, {"background-max-in-flight", b.MaxInFlight}} {
		if v.value < 0 || v.value > 1<<20 {
			errs = append(errs, fmt.Errorf("%s %d: want 0 to %d", v.name, v.value, 1<<20))
		}
	}
	return errs
}

// backgroundKey marks a request the simulator sent itself.
type backgroundKey struct{}

func isBackground(ctx context.Context) bool {
	v, _ := ctx.Value(backgroundKey{}).(bool)
	return v
}

// runBackground sends the background traffic until ctx ends, then waits
// for its requests to end.
func (s *Server) runBackground(ctx context.Context) {
	b := s.cfg.Background.withDefaults()
	rng := rand.New(rand.NewPCG(uint64(s.cfg.Seed), 0x6267))
	slots := make(chan struct{}, b.MaxInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	next := time.Now()
	for n := 1; ; n++ {
		next = next.Add(time.Duration(rng.ExpFloat64() / b.Rate * float64(time.Second)))
		timer.Reset(time.Until(next))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		select {
		case slots <- struct{}{}:
		default:
			s.phases.counted(false)
			continue
		}
		s.phases.counted(true)
		body := backgroundBody(s.cfg.Model, spread(rng, b.PromptTokens), spread(rng, b.OutputTokens))
		id := "user-" + strconv.Itoa(n)
		wg.Go(func() {
			defer func() { <-slots }()
			s.serveBackground(ctx, id, body)
		})
	}
}

// spread draws uniformly within ±50% of mean, at least 1.
func spread(rng *rand.Rand, mean int) int {
	lo := max(mean/2, 1)
	return lo + rng.IntN(max(mean-lo, 0)*2+1)
}

// backgroundBody is a streamed completion of exactly prompt tokens that
// generates exactly output tokens.
func backgroundBody(model string, prompt, output int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"model":%q,"stream":true,"ignore_eos":true,"max_tokens":%d,"prompt":[`, model, output)
	for i := range prompt {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(1000 + i%20000))
	}
	b.WriteString("]}")
	return b.Bytes()
}

// serveBackground sends one background request through the server's own
// handler, reading its answer into nothing.
func (s *Server) serveBackground(ctx context.Context, id string, body []byte) {
	hr, err := http.NewRequestWithContext(context.WithValue(ctx, backgroundKey{}, true),
		http.MethodPost, "/v1/completions", bytes.NewReader(body))
	if err != nil {
		return
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set(RequestIDHeader, id)
	defer func() { _ = recover() }() // a deliberate abort (http.ErrAbortHandler) ends it
	s.handler.ServeHTTP(&discardWriter{header: http.Header{}}, hr)
}

// discardWriter is a ResponseWriter whose client reads everything at once
// and keeps nothing.
type discardWriter struct{ header http.Header }

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Flush()                      {}
