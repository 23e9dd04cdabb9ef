package nagle

import (
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// reads makes chunks arriving in reads at the given offsets (ms), each read
// bringing batch events.
func reads(batch int32, atMS ...int) []event.Chunk {
	var out []event.Chunk
	for _, at := range atMS {
		for range batch {
			out = append(out, event.Chunk{At: time.Duration(at) * time.Millisecond, Tokens: 1, Batch: batch})
		}
	}
	return out
}

func TestNagleSuspect(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tests := []struct {
		name   string
		chunks []event.Chunk
		want   bool
	}{
		{"steady", reads(1, 10, 20, 30, 40, 50), false},
		{"holds, released coalesced, again and again", reads(4, 10, 50, 90, 131, 171), true},
		{"one 40 ms gap then coalesced (a pause does that)", append(reads(1, 10, 20, 30, 40), reads(2, 80)...), false},
		{"40 ms gaps, one event a read", reads(1, 10, 50, 90, 130, 170), false},
		{"long gaps coalesced", reads(3, 10, 110, 210, 310), false},
		{"three holds among many normal gaps", append(reads(1, 0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120), reads(3, 160, 200, 240)...), false},
	}
	for _, tt := range tests {
		if got := Suspect(tt.chunks); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
	// Holds inside pauses other streams shared are left out.
	holds := reads(4, 10, 50, 90, 131, 171)
	shared := func(from, to time.Duration) bool { return from >= 45*ms && to <= 135*ms }
	if Signature(holds, shared) {
		t.Errorf("suspect though two of its four holds fell in shared pauses")
	}
}
