// Package agent serves a measuring session's events to remote dashboards
// (Server, for `latscope agent`) and attaches a dashboard to one or more
// agents (Client, a pipeline.Source, for `latscope attach`).
//
// # The stream
//
// GET /events is text/event-stream. Every event is one frame whose id is
// its sequence number (1, 2, 3, ... in publish order) and whose data is the
// event's JSON (event.Marshal) on one line:
//
//	id: 42
//	data: {"v":1,"kind":"request",...}
//
// An id is a resume cursor: it means "everything up to here has been sent
// to you or announced to you as lost". A client that reconnects with
// Last-Event-ID: N gets exactly the events after N, none twice. Events the
// bounded replay ring (RingConfig: count, age, bytes) no longer holds are
// announced first by one event.Loss record whose Events is exactly how many
// were missed, with a reason; then come the oldest events still held.
//
// A new client (no Last-Event-ID) gets the current session header first and
// then every later event the ring holds, then live events: the dashboard
// re-aggregates from what it gets, so it starts from as much history as
// there is. The header is kept aside when it leaves the ring, so a client
// always knows what it is watching; it is also re-sent, in its place, to a
// resuming client whose gap covers it.
//
// When the session is over (Server.End, or the end of Consume's channel),
// every client gets the events still due and then an "end" frame
// (event: end), and the stream closes. Idle streams carry ": keep-alive"
// comments every Heartbeat so proxies keep them open.
//
// Publishing never waits on a client: it appends to the ring under a short
// lock. Each client is served by its own goroutine at its own cursor; a
// client that falls behind the ring gets a gap record, and one that stops
// reading is dropped when a write passes WriteTimeout. The response header
// Latscope-Stream identifies one run of the agent, so that a client that
// comes back to a restarted agent starts afresh instead of resuming at an
// id that now means something else.
//
// # Security
//
// The agent listens on 127.0.0.1:7070 by default. Any other address needs
// a bearer token (Authorization: Bearer ..., compared in constant time)
// unless InsecureNoAuth is set on purpose; New refuses to start otherwise.
// /events and /metrics require the token when one is set and answer 401
// (counted in latscope_unauthorized_requests_total; logged once, then at
// most one line every 10 s with the count) without it. /healthz is open, so
// supervisors and load balancers can probe it: without the token it says
// only {"status":"ok"}, with it the counts too, never the target. TLS is served from a certificate and key
// file. The token never appears in a log line, an error, an event or a
// metric.
//
// # Metrics
//
// /metrics serves the probe's statistics for Prometheus from a registry of
// the Server's own: TTFT, ITL, TPOT and E2E histograms, a histogram per
// client stage (label stage) and per breakdown stage (labels stage and
// provenance) under latscope's stage names, requests by outcome, tokens,
// the probe's in-flight count, and the stream's own clients, gaps and
// drops. MetricNames lists every name a query may use.
//
// # Clocks
//
// Events carry the agent's timestamps, and the attach client passes them
// on untouched: it never stamps, shifts or invents an event. Two machines'
// clocks differ, so a dashboard attached to several agents treats each
// agent's events as a timeline of its own and never mixes one agent's
// timestamps with another's or with the local clock. Only a Client's
// Status (connection state, retry times) uses the local clock.
package agent
