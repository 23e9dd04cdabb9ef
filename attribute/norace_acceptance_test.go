//go:build acceptance && !race

package attribute

const raceEnabled = false
