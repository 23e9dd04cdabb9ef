package bench

import (
	"context"
	"fmt"
	"net/http"

	"github.com/latscope/latscope/probe"
)

// ProbeStreamer drives a probe.Client through the Streamer interface. It
// adds nothing to the probe's own cost: the trace points at the probe's
// record's chunks.
type ProbeStreamer struct {
	c *probe.Client
}

// NewProbeStreamer returns a ProbeStreamer for the openai-chat dialect.
func NewProbeStreamer(baseURL, model string, hc *http.Client) (*ProbeStreamer, error) {
	c, err := probe.NewClient(probe.ClientConfig{BaseURL: baseURL, Dialect: "openai-chat", Model: model, HTTPClient: hc})
	if err != nil {
		return nil, err
	}
	return &ProbeStreamer{c: c}, nil
}

// Stream implements Streamer.
func (p *ProbeStreamer) Stream(ctx context.Context, req StreamRequest) Trace {
	rec := p.c.Do(ctx, probe.RequestSpec{
		ID: req.ID, Prompt: req.Prompt, PromptTokens: req.PromptTokens, OutputTokens: req.OutputTokens,
	})
	tr := Trace{Start: rec.Start, chunks: rec.Chunks}
	if !rec.OK() {
		tr.Err = fmt.Errorf("probe: %s: %s", rec.Outcome, rec.Error)
	}
	return tr
}

// ProbeFactory is the ClientFactory of the probe, with its own transport.
func ProbeFactory(model string) ClientFactory {
	return ClientFactory{Name: "probe", New: func(baseURL string) (Streamer, error) {
		return NewProbeStreamer(baseURL, model, &http.Client{Transport: NewTransport()})
	}}
}

// DefaultClients returns the probe and the bare client, each with its own
// transport of the same settings.
func DefaultClients(model string) []ClientFactory {
	return []ClientFactory{ProbeFactory(model), BareFactory(model)}
}
