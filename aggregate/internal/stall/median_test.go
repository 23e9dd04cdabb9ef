package stall

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The running median is, after every value, the value at len/2 of all so
// far sorted: what a sort of the members' gaps gave before.
func TestRunningMedianIsTheSortedMiddle(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, spread := range []int{3, 1000, 1 << 30} {
		var m runningMedian
		var all []time.Duration
		for range 500 {
			v := time.Duration(rng.IntN(spread))
			m.add(v)
			all = append(all, v)
			sorted := slices.Sorted(slices.Values(all))
			if got, want := m.value(), sorted[len(sorted)/2]; got != want {
				t.Fatalf("spread %d, %d values: median %v, want %v", spread, len(all), got, want)
			}
		}
		m.reset()
		if m.value() != 0 {
			t.Fatalf("after reset: %v", m.value())
		}
	}
}

func FuzzRunningMedian(f *testing.F) {
	f.Add([]byte{5, 1, 4, 1, 5, 9, 2, 6})
	f.Fuzz(func(t *testing.T, data []byte) {
		var m runningMedian
		var all []time.Duration
		for _, b := range data {
			m.add(time.Duration(b))
			all = append(all, time.Duration(b))
			sorted := slices.Sorted(slices.Values(all))
			if got, want := m.value(), sorted[len(sorted)/2]; got != want {
				t.Fatalf("%v: median %v, want %v", all, got, want)
			}
		}
	})
}
