package probe_test

// Helpers of the tests that run the real Runner and Client against a
// server: what a run emitted, and the window a stretch of time is.

import (
	"net/http"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/sim"
)

// window is a stretch of wall-clock time.
type window struct{ from, to time.Time }

func (w window) overlap(o window) time.Duration {
	from, to := w.from, w.to
	if o.from.After(from) {
		from = o.from
	}
	if o.to.Before(to) {
		to = o.to
	}
	return max(to.Sub(from), 0)
}

// runResult is what a Runner emitted.
type runResult struct {
	recs    []*event.Request
	markers []event.Marker
	stats   probe.RunStats
}

// runLoad runs a Runner and keeps everything it emits.
func runLoad(t testing.TB, d probe.Doer, cfg probe.LoadConfig, prompts *probe.PromptSource, setup func(*probe.Runner)) runResult {
	t.Helper()
	r, err := probe.NewRunner(d, cfg, prompts)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(r)
	}
	var out runResult
	err = r.Run(t.Context(), func(ev event.Event) {
		switch {
		case ev.Request != nil:
			out.recs = append(out.recs, ev.Request)
		case ev.Marker != nil:
			out.markers = append(out.markers, *ev.Marker)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	out.stats = r.Stats()
	return out
}

func prompts(t testing.TB, promptTokens, outputTokens int, seed int64) *probe.PromptSource {
	t.Helper()
	p, err := probe.NewPromptSource(t.Context(), probe.PromptConfig{
		PromptTokens: probe.Length{Mean: promptTokens}, OutputTokens: probe.Length{Mean: outputTokens}, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func simClient(t testing.TB, url string, hc *http.Client) *probe.Client {
	t.Helper()
	c, err := probe.NewClient(probe.ClientConfig{BaseURL: url, Dialect: probe.DialectOpenAIChat, Model: sim.DefaultModel,
		Timeout: time.Minute, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}
