package main

import (
	"context"

	"github.com/latscope/latscope/otlpexport"
	"github.com/latscope/latscope/pipeline"
)

// traceExport sends each request to an OpenTelemetry collector as a trace.
// It is a lossy consumer: a slow or absent collector costs dropped spans
// (counted), never measuring time.
type traceExport struct {
	exp *otlpexport.Exporter
	sub *pipeline.Subscription
}

func newTraceExport(ctx context.Context, endpoint string) (*traceExport, error) {
	exp, err := otlpexport.New(ctx, otlpexport.Config{Endpoint: endpoint})
	if err != nil {
		return nil, err
	}
	return &traceExport{exp: exp}, nil
}

func (t *traceExport) start(ctx context.Context, fan *pipeline.Fanout) func() error {
	t.sub = fan.Subscribe("otlp export", 1<<14, pipeline.Lossy)
	done := make(chan error, 1)
	go func() { done <- t.exp.Run(ctx, t.sub.Events()) }()
	return func() error { return <-done }
}
