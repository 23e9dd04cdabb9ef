// Package report turns a recorded session into a report: the summary
// tables of `latscope run` (latency percentiles per metric and per stage,
// throughput, errors by kind and the top error messages, the TTFT
// breakdown with each stage's provenance, the server and the GPU, markers
// and insights), over time, and, for two recordings, side by side.
//
// Load reads a recording twice: once to learn how far events lag behind
// the time order (a request is recorded when it ends, after its server span
// is joined), then to replay them in time order into an aggregate.Aggregator
// that aggregates on the events' own times, taking a snapshot at every
// point of the time series. A file cut short (the writer was killed) is
// reported up to its last complete frame, with a warning that names the
// offset; a file that is not a recording, is damaged or comes from a newer
// version is an error.
//
// # Formats
//
//   - md: Markdown tables, for an incident or a pull request. Text from the
//     recording is escaped, so a model name cannot break a table or inject
//     markup.
//   - json: aggregate.WriteJSON's object, byte for byte as `latscope run
//     --json` writes it, with one key added last, "report": {"file",
//     "events", "warnings", "series": {"step_s", "window", "points": [{"at_s",
//     "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "waiting",
//     "running", "in_flight", "ok_per_s", "tok_per_s"}]}, "bands": {"mean",
//     "p50", "p90", "p99": {"from_pct", "to_pct", "requests", "min_ttft_ms",
//     "max_ttft_ms", "ttft_ms", "stages_ms"}}}. Unknown values are null. A
//     comparison is {"base": ..., "other": ..., "comparison": {"rule",
//     "alpha", "window_s", "windows", "changes": [{"section", "name", "stat",
//     "unit", "base", "other", "change", "change_pct", "p", "tested",
//     "significant", "windows"}]}}.
//   - csv: one row per (metric or stage, statistic), with a header; see
//     below.
//   - html: one offline page: no scripts, no fonts, images or styles from
//     anywhere (a Content-Security-Policy forbids them too), every recorded
//     value escaped by html/template. Inline SVG charts: the TTFT breakdown
//     as stacked bars for the mean and the slowest 1% of requests (each
//     band's stages add up to its TTFT; estimated stages are hatched and
//     labelled), TTFT and ITL p50/p99 over time, the completed requests per
//     second on the same time axis, queue depth over time (the server's
//     waiting and running requests, the probe's in flight), and TTFT
//     p50/p99 against throughput, one point per window of the series, no
//     two overlapping. A sweep's page opens with its curve: TTFT p50/p99
//     and ITL p99 against achieved throughput, one point per step, the max
//     load and knee sweep found marked at their steps (<g class="max-load">,
//     <g class="knee">). Colours are the Okabe-Ito palette; segments, lines
//     and markers also differ in labels, dashes and shapes, so the charts
//     read without colour. Simulated
//     sessions and GPUs are labelled SIMULATED on the page and in every
//     chart.
//
// The time series has at most 300 points: one every 1, 2, 5, 10, 15, 30 s,
// 1, 2, 5 ... min, the shortest step that fits the session. Each point's
// percentiles and rates cover the aggregator's window ending there (the
// last 10 s for steps up to 10 s, about a minute up to a minute, else about
// five minutes); queue depth and in flight are the latest readings.
//
// # CSV columns
//
// A single recording: section, name, statistic, value, unit, provenance.
//
//   - section: requests, latency, client_stage, breakdown, band, error,
//     http_status, error_message, server, server_stage, gpu, marker.
//   - name: the metric or stage (ttft, itl, tpot, e2e, sched_lag,
//     tok_per_s_per_request, queue, prefill, ...), an error outcome, an
//     HTTP status, "outcome: message", a server gauge, gpuN, a marker kind.
//   - statistic: count, mean, p50, p90, p99, max, share (of TTFT, in %),
//     mean_band and p99_band (the stage's mean in the band of every request
//     and of the slowest 1%), peak, last, slope, value, and for GPUs util,
//     mem_used, mem_total, power, temperature, sm_clock.
//   - value: a number with at most three decimals; empty when unknown.
//   - unit: ms, count, requests, tokens, s, req/s, tok/s, %, fraction,
//     requests/s, GiB, W, C, MHz, markers.
//   - provenance: measured, server, estimated (several joined by ";" when
//     a stage's requests differ), or simulated for a simulated GPU.
//
// A comparison: section, name, statistic, unit, base, other, change
// (other − base), change_pct (of base), p_value, significant (true or
// false), windows_base, windows_other (the windows the test used).
//
// # Comparing two recordings
//
// Compare cuts both runs into equal, consecutive windows starting at each
// run's first completion: 10 s, or shorter, down to 1 s, so that the
// shorter run has about 10 of them. Each window's events go through an
// aggregator of their own, and every statistic (a metric's or stage's mean,
// p50, p99; throughput; error rate; server queue depth and stage means) is
// read once per window. A change is significant when Welch's two-sided
// t-test on the two runs' per-window values gives a p-value below 0.05
// after the Holm-Bonferroni correction over every row tested, so that two
// runs of one distribution show no significant change at least 95% of the
// time, however many rows there are. A row with a value in fewer than two
// windows of either run is not tested (n/a). The values shown are whole-run
// figures; the windows only judge the noise. Windows next to each other are
// not fully independent (a queue carries over), which the test ignores: it
// is a guard against reading noise as a change, not a proof.
package report
