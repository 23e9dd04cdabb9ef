// Package sweep finds the load a server can take: it steps the load (an
// open-loop rate or a closed-loop concurrency) from low to past capacity,
// measures each step once it has settled, and reports the highest load
// that meets the SLO, the knee and the saturation throughput.
//
// # Steps
//
// A Plan lists the loads: a geometric series (Start, Start·Factor, ... up
// to Max) or an explicit list. The coarse steps run in order until one
// saturates the server or passes the error limit, or the list ends. Then up
// to Refine steps bisect (geometrically for rates, in whole streams for
// concurrency) between the highest load that passed and the lowest that
// failed, so a plan of doublings still ends within a few percent of the
// boundary.
//
// Each step's time, in event time:
//
//	start ── warm-up ──► measured ──► decided ── cool-down ──► end
//
// Requests sent during the warm-up (while the batch fills) and after the
// step was decided, and those still in flight when it ended (cancelled),
// are counted apart and kept out of its statistics; so is everything its
// aux sources report outside the measured part. Throughput counts the
// successful completions that land in the measured part, whenever they
// were sent.
//
// # Judging
//
// The steps are judged by package aggregate/sweepjudge, on the events'
// own times: every Interval it fits the trends of TTFT p50 and the backlog
// (the server's queue, the probe's requests in flight) and calls a step
// steady (they are flat over the last Window), saturated (a backlog grows
// without bound; in closed loop, more streams add less than Tolerance of
// throughput), failing (past StopErrors), or, at StepMax, not steady. Its
// package doc has the rules. A step passes when it was sustainable and met
// every objective of the SLO; a step without a successful measured request
// measured nothing of the server, so it ends the sweep, refinements too,
// and Result.Failure names it and its top error.
//
// # Findings
//
//   - Max load: the highest load that passed, every lower load passing
//     too (a lucky pass above a failure does not count).
//   - Knee: the lowest load at which queue wait is the largest stage of
//     the mean TTFT breakdown (aggregate's bands, whose stages add up to
//     the TTFT): past it, more load buys mostly waiting. It needs server
//     timings joined onto the requests (the attributor as Stage), and,
//     where the server's queue gauge was read, a gauge that showed
//     requests waiting: a queue share where nothing queued is no knee. A
//     knee above the max load says so, and why (its step's verdict).
//   - Saturation: the step with the highest throughput; the server's
//     ceiling when some step saturated it.
//
// Each comes only from steps with a successful request; after a failed
// step the max load is a lower bound. Latencies a step did not measure are
// null in the JSON and "-" in the table, never 0.
//
// # Wiring
//
// Run runs one pipeline for the whole sweep rather than one per step: the
// aux sources (metrics scrape, span receiver, GPU) keep their state and
// ports across steps, and a recorder sees one stream. The pipeline's only
// primary source is a stepper that builds each step's source (usually a
// probe.Runner) with the caller's Step function and marks the step's
// start, end and result in the stream (sweepjudge's markers). A
// sweepjudge.Judge reads the fan-out, measures the running step with its
// own aggregator on the events' times, has the stepper end the step once
// it is decided and hands its result back before the next step is
// planned; the findings are drawn from the judged steps (ResultOf).
// Because the judge is a function of the stream, Replay (and a report,
// through sweepjudge.Recorded) judges a recorded sweep exactly as the live
// one was judged.
package sweep
