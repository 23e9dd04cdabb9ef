//go:build acceptance && race

package aggregate_test

// raceEnabled is set when the race detector slows everything several times:
// tests whose subject is timing on a real server skip their timing checks.
const raceEnabled = true
