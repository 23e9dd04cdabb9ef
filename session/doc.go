// Package session builds a measuring session: the composition root as a
// library. Open takes options already read from flags (or built by a
// program), finds out what runs at the target, calibrates the prompts and
// builds every source: the probe's load as the primary source, the
// collectors (Prometheus, GPU, the client host, an OTLP span receiver) as
// auxiliary ones, and the attributor between them and the consumers.
//
//	probe ───────────┐
//	prometheus ──────┤                      ┌─► aggregator ─► status line / summary
//	gpu, host ───────┼─► attributor ─► fan-out
//	otlp receiver ───┘                      └─► dashboard, recorder, agent, export
//
// The command line (cmd/latscope) turns flags into Options, runs what Open
// built and turns the result into an exit code.
package session
