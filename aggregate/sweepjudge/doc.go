// Package sweepjudge judges the steps of a load sweep from its event
// stream: it is the part of aggregate that measures a sweep, as package
// sweep is the part that plans the steps and drives the load.
//
// A sweep's stream carries its step markers (StartMarker, EndMarker,
// ResultMarker) and two notes around the steps (RulesMarker, EndedMarker).
// A Judge reads the stream, gives each step between its start and end
// markers a meter, and measures the step on the events' own times, with
// its own aggregator (the figures of a Step). Requests sent during the warm-up (while the batch fills) and after the
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
// sweep, refinements too, and the sweep's Result.Failure names it and its
// top error.
//
// The live sweep is told (Options.Decided) when a step is decided, so it
// ends the step, and is handed each finished step (Options.Finished)
// before it plans the next. Because the judge is a function of the
// stream, Recorded judges a
// recording of a sweep exactly as the live sweep judged it, from the
// rules its stream carries.
package sweepjudge
