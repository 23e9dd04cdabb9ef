// Package event is latscope's shared data model: the typed, versioned records
// that the probe and the collectors produce and that the aggregator, the
// dashboard, the recorder and the agent consume.
//
// Everything that crosses a package boundary (or the network, or a file) is an
// Event. One JSON encoding is used everywhere; it carries a schema version so
// that a reader can refuse records it does not understand instead of
// misreading them.
//
// This package is a leaf: of the rest of latscope it imports only
// internal/textsafe, to make outside text safe to show (Safe).
package event

import (
	"time"
)

// SchemaVersion is the version of the JSON encoding written by this build.
// Bump it on any incompatible change to the records below.
const SchemaVersion = 1

// Kind says which payload an Event carries.
type Kind string

// The kinds of event.
const (
	KindRequest Kind = "request" // one request's complete record, from the probe
	KindServer  Kind = "server"  // one interval of the server's own metrics, from a collector
	KindGPU     Kind = "gpu"     // one GPU sample, from the NVML or the GPU exporter collector
	KindMarker  Kind = "marker"  // something noteworthy at a point in time: stall, gap, insight, note
	KindSession Kind = "session" // the session's header: target, server, load; first in a recording
	KindProbe   Kind = "probe"   // the probe's own state: in flight, CPU, scheduling lag
	KindSpan    Kind = "span"    // the server's timing of one request, before it is joined onto the request
	KindLoss    Kind = "loss"    // events a consumer did not get, and why
	KindHost    Kind = "host"    // one interval of the client host's own CPU pressure, from the host collector
)

// Event is the envelope every record travels in. Exactly one payload pointer
// is set, the one that matches Kind.
type Event struct {
	V       int           `json:"v"`
	Kind    Kind          `json:"kind"`
	Request *Request      `json:"request,omitempty"`
	Server  *ServerSample `json:"server,omitempty"`
	GPU     *GPUSample    `json:"gpu,omitempty"`
	Marker  *Marker       `json:"marker,omitempty"`
	Session *Session      `json:"session,omitempty"`
	Probe   *ProbeSample  `json:"probe,omitempty"`
	Span    *Span         `json:"span,omitempty"`
	Loss    *Loss         `json:"loss,omitempty"`
	Host    *HostSample   `json:"host,omitempty"`
}

// Time returns the event's own timestamp: a request's start, a sample's or a
// marker's time. Consumers aggregate on this, never on time.Now, so replays
// and tests are deterministic.
func (e Event) Time() time.Time {
	switch {
	case e.Request != nil:
		return e.Request.Start
	case e.Server != nil:
		return e.Server.Time
	case e.GPU != nil:
		return e.GPU.Time
	case e.Marker != nil:
		return e.Marker.Time
	case e.Session != nil:
		return e.Session.Time
	case e.Probe != nil:
		return e.Probe.Time
	case e.Span != nil:
		return e.Span.Time
	case e.Loss != nil:
		return e.Loss.Time
	case e.Host != nil:
		return e.Host.Time
	}
	return time.Time{}
}

// NewRequest wraps a request record in an Event.
func NewRequest(r *Request) Event { return Event{V: SchemaVersion, Kind: KindRequest, Request: r} }

// NewServer wraps a server sample in an Event.
func NewServer(s *ServerSample) Event { return Event{V: SchemaVersion, Kind: KindServer, Server: s} }

// NewGPU wraps a GPU sample in an Event.
func NewGPU(g *GPUSample) Event { return Event{V: SchemaVersion, Kind: KindGPU, GPU: g} }

// NewMarker wraps a marker in an Event.
func NewMarker(m *Marker) Event { return Event{V: SchemaVersion, Kind: KindMarker, Marker: m} }

// NewSession wraps a session header in an Event.
func NewSession(s *Session) Event { return Event{V: SchemaVersion, Kind: KindSession, Session: s} }

// NewProbe wraps a probe sample in an Event.
func NewProbe(p *ProbeSample) Event { return Event{V: SchemaVersion, Kind: KindProbe, Probe: p} }

// NewSpan wraps a server span in an Event.
func NewSpan(s *Span) Event { return Event{V: SchemaVersion, Kind: KindSpan, Span: s} }

// NewLoss wraps a loss record in an Event.
func NewLoss(l *Loss) Event { return Event{V: SchemaVersion, Kind: KindLoss, Loss: l} }

// NewHost wraps a host sample in an Event.
func NewHost(h *HostSample) Event { return Event{V: SchemaVersion, Kind: KindHost, Host: h} }
