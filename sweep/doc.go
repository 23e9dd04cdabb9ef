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
// # Steadiness and stopping
//
// Every Interval of event time the step's trends are fitted by least
// squares:
//
//   - TTFT p50: the medians of runs of at least five consecutive
//     completions over the last Window, so one slow request cannot tilt the
//     line;
//   - the backlog: the server's queue depth (from its metrics) and the
//     probe's requests in flight (arrivals less completions), over the last
//     Window and over the whole measured part.
//
// A trend is flat when its fitted change over the stretch stays within
// Tolerance of its level, or within a floor (2 ms for TTFT, MinGrowth
// requests for a backlog) so a series near zero is not held to nothing.
//
//   - Steady: TTFT p50 and every backlog are flat over the last Window.
//   - Saturated: a backlog grew by more than its limit over the whole
//     measured part and still grows over the last Window: arrivals exceed
//     completions and the queue grows without bound. The sweep stops
//     climbing. In closed loop the queue is bounded by the streams, so
//     there a step is saturated when it adds less than Tolerance of
//     throughput over the best lower load: more streams only wait longer.
//   - Errors: past StopErrors of the measured requests (at least 20) the
//     step fails and the sweep stops climbing.
//   - StepMax: a step that has not settled ends anyway, saturated if a
//     backlog grew over the whole measured part, else "not steady", with
//     what still moved.
//
// A step passes when it was sustainable (not saturated, errors within the
// limit, some requests succeeded) and met every objective of the SLO. A
// step without a successful measured request (a server that refuses
// everything, or went away) measured nothing of the server: it ends the
// sweep, refinements too, and Result.Failure names it and its top error.
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
// start, end and result in the stream. A judge reads the fan-out, measures
// the running step with its own aggregator on the events' times, ends the
// step once it is decided and hands its result back before the next step
// is planned. Because the judge is a function of the stream, Replay judges
// a recorded sweep exactly as the live one was judged.
package sweep
