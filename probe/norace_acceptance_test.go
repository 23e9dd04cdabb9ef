//go:build acceptance && !race

package probe_test

const raceEnabled = false
