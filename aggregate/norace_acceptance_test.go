//go:build acceptance && !race

package aggregate_test

const raceEnabled = false
