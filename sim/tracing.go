package sim

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// tracing sends one vLLM-shaped "llm_request" span per finished request over
// OTLP/HTTP (protobuf), through a TracerProvider of its own.
type tracing struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// exportInterval is short so spans show up while a test or demo runs.
const exportInterval = 200 * time.Millisecond

func newTracing(endpoint string) (*tracing, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("otlp traces endpoint %q: want an http(s) URL such as http://127.0.0.1:4318/v1/traces", endpoint)
	}
	exp, err := otlptracehttp.New(context.Background(),
		otlptracehttp.WithEndpointURL(endpoint),
		otlptracehttp.WithEncoding(otlptracehttp.EncodingProtobuf),
		otlptracehttp.WithTimeout(5*time.Second),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}),
	)
	if err != nil {
		return nil, fmt.Errorf("otlp exporter for %s: %w", endpoint, err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(exportInterval)),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "latscope-sim"))),
	)
	return &tracing{
		tp:     tp,
		tracer: tp.Tracer("github.com/latscope/latscope/sim"),
		prop:   propagation.TraceContext{},
	}, nil
}

// extract returns a context carrying the caller's span from traceparent.
func (t *tracing) extract(h http.Header) context.Context {
	return t.prop.Extract(context.Background(), propagation.HeaderCarrier(h))
}

// spanTimes are the intervals of one finished request, as vLLM's do_tracing
// computes them.
type spanTimes struct {
	arrival, end                  time.Time
	ttft, e2e, queue, prefill     time.Duration
	decode, inference             time.Duration
	promptTokens, completionToken int
	maxTokens                     int // 0: not set by the client
}

func (t *tracing) record(parent context.Context, id string, st spanTimes) {
	_, span := t.tracer.Start(parent, "llm_request",
		trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(st.arrival))
	attrs := []attribute.KeyValue{
		attribute.Float64("gen_ai.latency.time_to_first_token", st.ttft.Seconds()),
		attribute.Float64("gen_ai.latency.e2e", st.e2e.Seconds()),
		attribute.Float64("gen_ai.latency.time_in_queue", st.queue.Seconds()),
		attribute.Float64("gen_ai.latency.time_in_model_prefill", st.prefill.Seconds()),
		attribute.Float64("gen_ai.latency.time_in_model_decode", st.decode.Seconds()),
		attribute.Float64("gen_ai.latency.time_in_model_inference", st.inference.Seconds()),
		attribute.Int("gen_ai.usage.prompt_tokens", st.promptTokens),
		attribute.Int("gen_ai.usage.completion_tokens", st.completionToken),
		attribute.String("gen_ai.request.id", id),
	}
	if st.maxTokens > 0 {
		attrs = append(attrs, attribute.Int("gen_ai.request.max_tokens", st.maxTokens))
	}
	span.SetAttributes(attrs...)
	span.End(trace.WithTimestamp(st.end))
}

// shutdown flushes pending spans.
func (t *tracing) shutdown(ctx context.Context) error {
	if err := t.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("flush otlp spans: %w", err)
	}
	return nil
}
