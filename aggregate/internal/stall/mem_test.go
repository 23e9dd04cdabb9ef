package stall

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestDetectorHeldBytes checks that the detector's evidence does not
// grow with the tokens a request streamed: it once kept every chunk's
// arrival time of every request in its 2-minute window, so a fast server
// with long outputs grew it by hundreds of MB a minute. 300 requests of
// 8,192 chunks each would hold about 80 MB that way; the test allows 8 MB.
// Not parallel: it reads the process's heap.
func TestDetectorHeldBytes(t *testing.T) {
	d := New(Config{})
	before := heapAfterGC()
	for i := range 300 {
		// Each stream starts 100 ms after the last and streams 8,192
		// chunks 0.1 ms apart: all inside the detector's window.
		r := stallStreamRec(fmt.Sprintf("r%d", i), time.Duration(i)*100*time.Millisecond, 8192, 100*time.Microsecond, 0, 0)
		d.Add(r)
	}
	held := int64(heapAfterGC()) - int64(before)
	if len(d.requests) != 300 {
		t.Fatalf("detector keeps %d requests as evidence, want 300 (all in its window)", len(d.requests))
	}
	if held > 8<<20 {
		t.Errorf("detector holds %d MB after 300 requests of 8,192 chunks, want at most 8 MB", held>>20)
	}
	runtime.KeepAlive(d)
}

func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
