//go:build race

package sim

// raceEnabled is true under the race detector, which slows the server by
// 5-10x: timing assertions are then skipped, the scenarios still run.
const raceEnabled = true
