// Package attribute splits each request's time to first token into stages
// with the best evidence there is for it: the client's own measurements,
// the server's per-request timing (in the stream, in Server-Timing, in a
// span), its interval statistics, and the round trip. Every stage says
// whether it was measured, reported by the server or estimated, and from
// what (its Source).
//
// Attribute is the rule for one request; Attributor is the pipeline's
// stage that applies it to the stream, joining the collectors' spans and
// interval samples onto the probe's request records. It reads what the
// collectors produce (their source names, the metrics dialects' queue
// gauges) and never runs a collector itself.
package attribute
