package otlpexport

import (
	"context"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"

	"github.com/latscope/latscope/event"
)

// TestSpansComeFromTheSDKsTracer: the spans are the SDK's own, with the
// probe's ids, the request's times, kinds and status, the resource and the
// scope, and the package's code does not build them with the SDK's test
// helpers.
func TestSpansComeFromTheSDKsTracer(t *testing.T) {
	e := &Exporter{maker: newSpanMaker(resource.NewSchemaless())}
	defer e.maker.shutdown(context.Background())
	r := request()
	r.Outcome, r.Error = event.OutcomeHTTPStatus, "HTTP 503"
	spans := e.requestSpans(r)
	root := spans[0]
	if got := root.SpanContext(); got.TraceID().String() != r.TraceID || got.SpanID().String() != r.SpanID || !got.IsSampled() {
		t.Errorf("root span context %v, want the probe's ids, sampled", got)
	}
	if root.Parent().IsValid() || root.SpanKind() != trace.SpanKindClient || !root.StartTime().Equal(r.Intended) || root.EndTime().Sub(root.StartTime()) != r.E2E {
		t.Errorf("root: parent %v, kind %v, %v to %v: want no parent, a client span over the E2E", root.Parent(), root.SpanKind(), root.StartTime(), root.EndTime())
	}
	if st := root.Status(); st.Code != codes.Error || st.Description != "HTTP 503" {
		t.Errorf("root status %+v, want the request's error", st)
	}
	if root.InstrumentationScope().Name != scopeName {
		t.Errorf("scope %q", root.InstrumentationScope().Name)
	}
	seen := map[trace.SpanID]bool{}
	for _, s := range spans[1:] {
		if s.Parent().SpanID() != root.SpanContext().SpanID() || s.SpanKind() != trace.SpanKindInternal || s.Status().Code != codes.Unset {
			t.Errorf("%s: parent %v, kind %v, status %v: want an internal child of the request, status unset", s.Name(), s.Parent().SpanID(), s.SpanKind(), s.Status())
		}
		if id := s.SpanContext().SpanID(); seen[id] || s.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Errorf("%s: span %v of trace %v: want a new id in the request's trace", s.Name(), id, s.SpanContext().TraceID())
		}
		seen[s.SpanContext().SpanID()] = true
	}

	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			if strings.Contains(imp.Path.Value, "tracetest") {
				t.Errorf("%s imports %s, the SDK's test helpers", f, imp.Path.Value)
			}
		}
	}
}

// TestCancelledSpanIsNoError: a request the run's end cut short did not
// fail, so its span's status is unset, not an error a trace backend counts;
// its latscope.outcome says cancelled.
func TestCancelledSpanIsNoError(t *testing.T) {
	e := &Exporter{maker: newSpanMaker(resource.NewSchemaless())}
	defer e.maker.shutdown(context.Background())
	r := request()
	r.Outcome, r.RunEnded, r.Error = event.OutcomeCancelled, true, "cancelled: interrupted by SIGINT"
	root := e.requestSpans(r)[0]
	if st := root.Status(); st.Code != codes.Unset {
		t.Errorf("root status %+v, want unset", st)
	}
	var outcome string
	for _, a := range root.Attributes() {
		if a.Key == "latscope.outcome" {
			outcome = a.Value.AsString()
		}
	}
	if outcome != "cancelled" {
		t.Errorf("latscope.outcome %q, want cancelled", outcome)
	}
}
