package stall

import "time"

// runningMedian is the upper median of the values added so far (the one at
// len/2 of them sorted), kept as they come in O(log n) each: a stall at
// thousands of streams is asked its typical gap at every observation, and
// sorting its members' gaps each time was most of the probe's CPU. The
// lower half is a max-heap, the upper half a min-heap with the median at
// its root.
type runningMedian struct {
	lower []time.Duration // max-heap, n/2 values
	upper []time.Duration // min-heap, the other n - n/2
}

func (m *runningMedian) add(v time.Duration) {
	if len(m.upper) > 0 && v < m.upper[0] {
		m.lower = heapPush(m.lower, v, above)
	} else {
		m.upper = heapPush(m.upper, v, below)
	}
	var root time.Duration
	switch {
	case len(m.lower) > len(m.upper):
		m.lower, root = heapPop(m.lower, above)
		m.upper = heapPush(m.upper, root, below)
	case len(m.upper) > len(m.lower)+1:
		m.upper, root = heapPop(m.upper, below)
		m.lower = heapPush(m.lower, root, above)
	}
}

// value is the median; zero before any value.
func (m *runningMedian) value() time.Duration {
	if len(m.upper) == 0 {
		return 0
	}
	return m.upper[0]
}

// reset empties m, keeping its room.
func (m *runningMedian) reset() { m.lower, m.upper = m.lower[:0], m.upper[:0] }

func below(a, b time.Duration) bool { return a < b }
func above(a, b time.Duration) bool { return a > b }

// heapPush adds v to h, a heap whose root is first by first(a, b).
func heapPush(h []time.Duration, v time.Duration, first func(a, b time.Duration) bool) []time.Duration {
	h = append(h, v)
	for i := len(h) - 1; i > 0; {
		parent := (i - 1) / 2
		if !first(h[i], h[parent]) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
	return h
}

// heapPop removes h's root and returns it.
func heapPop(h []time.Duration, first func(a, b time.Duration) bool) ([]time.Duration, time.Duration) {
	root := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		child := 2*i + 1
		if child >= len(h) {
			break
		}
		if r := child + 1; r < len(h) && first(h[r], h[child]) {
			child = r
		}
		if !first(h[child], h[i]) {
			break
		}
		h[i], h[child] = h[child], h[i]
		i = child
	}
	return h, root
}
