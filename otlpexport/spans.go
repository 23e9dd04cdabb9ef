package otlpexport

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// spanMaker makes finished spans through the SDK's own tracer, with the
// ids and times latscope decided: the request's happened before it is
// exported, and its ids are the ones the probe sent in traceparent. The
// tracer's provider has no exporter; each span, once ended, is taken from
// the provider's one processor and batched by the Exporter.
type spanMaker struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	ended    *lastEnded
}

func newSpanMaker(res *resource.Resource) *spanMaker {
	ended := &lastEnded{}
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithIDGenerator(chosenIDs{}),
		// No limit: a span carries every attribute latscope gave it,
		// whatever the OTEL_SPAN_* environment says.
		sdktrace.WithRawSpanLimits(sdktrace.SpanLimits{
			AttributeValueLengthLimit: -1, AttributeCountLimit: -1, EventCountLimit: -1, LinkCountLimit: -1,
			AttributePerEventCountLimit: -1, AttributePerLinkCountLimit: -1,
		}),
		sdktrace.WithSpanProcessor(ended),
	)
	return &spanMaker{provider: provider, tracer: provider.Tracer(scopeName), ended: ended}
}

// span makes one ended span: sc's ids, a child of parent when parent is
// valid, from start to end.
func (m *spanMaker) span(name string, sc, parent trace.SpanContext, kind trace.SpanKind, start, end time.Time, attrs []attribute.KeyValue, code codes.Code, description string) sdktrace.ReadOnlySpan {
	ctx := context.WithValue(context.Background(), idsKey{}, sc)
	if parent.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, parent)
	}
	_, s := m.tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	if code != codes.Unset {
		s.SetStatus(code, description)
	}
	s.End(trace.WithTimestamp(end)) // the processor takes it here, synchronously
	return m.ended.take()
}

// shutdown ends the provider, after the last span: nothing is left to
// flush (it exports nothing), and a span ended later would not be taken.
func (m *spanMaker) shutdown(ctx context.Context) error { return m.provider.Shutdown(ctx) }

// idsKey carries the span context whose ids the next span gets.
type idsKey struct{}

// chosenIDs is the provider's id generator: it hands out the ids that
// spanMaker.span put in the context, never random ones.
type chosenIDs struct{}

func (chosenIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	sc, _ := ctx.Value(idsKey{}).(trace.SpanContext)
	return sc.TraceID(), sc.SpanID()
}

func (chosenIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	sc, _ := ctx.Value(idsKey{}).(trace.SpanContext)
	return sc.SpanID()
}

// lastEnded is the provider's span processor: it keeps the span that just
// ended for spanMaker.span to take.
type lastEnded struct {
	mu   sync.Mutex
	last sdktrace.ReadOnlySpan
}

func (p *lastEnded) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (p *lastEnded) OnEnd(s sdktrace.ReadOnlySpan) {
	p.mu.Lock()
	p.last = s
	p.mu.Unlock()
}

func (p *lastEnded) take() sdktrace.ReadOnlySpan {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.last
	p.last = nil
	return s
}

func (p *lastEnded) Shutdown(context.Context) error   { return nil }
func (p *lastEnded) ForceFlush(context.Context) error { return nil }
