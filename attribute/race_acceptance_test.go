//go:build acceptance && race

package attribute

// raceEnabled is set when the race detector slows everything several times:
// tests whose subject is timing on a real loopback skip their timing checks.
const raceEnabled = true
