// Package bench measures latscope's own instrument: how accurately the probe
// times tokens (bench accuracy), how fast and cheaply it reads them (bench
// throughput), whether its memory stays flat (bench soak) and what it costs
// and how well it times at thousands of streams (bench scale).
//
// Both benches run a baseline side by side with the probe in the same run, a
// bare client that is the floor any Go client could reach, and report the
// probe's numbers as ratios to it. They measure; they never judge by exit
// code. Missed targets are marked in the report.
//
// Where each part lives:
//   - stream.go: the small Streamer interface both clients are driven through;
//   - bare.go: the bare client (net/http + bufio.Reader.ReadSlice);
//   - probe_streamer.go: the adapter that drives probe.Client;
//   - accuracy.go, errmath.go, truth.go, sim_server.go: the accuracy bench
//     against the in-process simulator's own flush times;
//   - throughput.go, fastserver.go, child.go, usage*.go: the throughput bench
//     against a max-speed streaming server in a child process;
//   - soak.go: the soak's cases, checkpoints and verdicts;
//   - scale.go, scale_case.go, framelog.go, rlimit_*.go: the scale bench,
//     each client in a child process against a paced child server, both
//     writing frame logs on a clock the processes share;
//   - report.go, ratio.go: the human tables and the JSON results.
package bench
