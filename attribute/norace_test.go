//go:build !race

package attribute

const raceEnabled = false
