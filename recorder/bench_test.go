package recorder

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// tokensPerRequest is the size of every benchmark request: a token event is
// one of its chunks.
const tokensPerRequest = 128

// benchRequests returns n distinct realistic 128-token request events, one
// started every 10 ms.
func benchRequests(n int) []event.Event {
	rng := rand.New(rand.NewPCG(7, 8))
	evs := make([]event.Event, n)
	for i := range evs {
		evs[i] = event.NewRequest(realisticRequest(rng, t0.Add(time.Duration(i)*10*time.Millisecond), uint64(i)))
	}
	return evs
}

// cost is what one side of a benchmark took.
type cost struct{ wall, cpu time.Duration }

func measure(f func()) cost {
	wall, cpu := time.Now(), processCPU()
	f()
	return cost{wall: time.Since(wall), cpu: processCPU() - cpu}
}

// ratio divides, or says 0 when the baseline is unknown.
func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// BenchmarkRecord measures recording realistic request records, a frame
// every 1, 8 or 64 requests (a second's worth at 1, 8 or 64 requests per
// second), against the baseline of bare event.Marshal to io.Discard.
//
// Metrics: ns/token and cpu-ns/token (budget: 1000), B/request on disk
// (budget: 2048) and json-B/request before compression, and x-marshal:
// recording's CPU time over the baseline's.
func BenchmarkRecord(b *testing.B) {
	reqs := benchRequests(256)
	for _, perFrame := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("requests_per_frame=%d", perFrame), func(b *testing.B) {
			base := measure(func() {
				for i := range b.N {
					line, err := event.Marshal(reqs[i%len(reqs)])
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Discard.Write(line)
				}
			})

			var disk countingWriter
			w, err := NewWriter(&disk, testHeader(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			header, jsonHeader := disk.n, w.Stats().JSONBytes
			b.ResetTimer()
			got := measure(func() {
				for i := range b.N {
					if err := w.Write(reqs[i%len(reqs)]); err != nil {
						b.Fatal(err)
					}
					if (i+1)%perFrame == 0 {
						if err := w.Flush(); err != nil {
							b.Fatal(err)
						}
					}
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			})
			b.StopTimer()

			tokens := float64(b.N * tokensPerRequest)
			b.ReportMetric(float64(got.wall)/tokens, "ns/token")
			b.ReportMetric(float64(got.cpu)/tokens, "cpu-ns/token")
			b.ReportMetric(float64(disk.n-header)/float64(b.N), "B/request")
			b.ReportMetric(float64(w.Stats().JSONBytes-jsonHeader)/float64(b.N), "json-B/request")
			b.ReportMetric(ratio(got.cpu, base.cpu), "x-marshal")
		})
	}
}

// BenchmarkReplay measures a max-speed replay of a file of 512 realistic
// requests (64 per frame), decode only, against the baseline of bare
// event.Unmarshal of the same lines from memory.
//
// Metrics: tokens/s by CPU time (budget: at least 1e6), ns/token by wall
// time, and x-unmarshal: replay's CPU time over the baseline's.
func BenchmarkReplay(b *testing.B) {
	reqs := benchRequests(512)
	path := filepath.Join(b.TempDir(), "bench.jsonl.zst")
	w, err := Create(path, testHeader(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	lines := make([][]byte, len(reqs))
	for i, ev := range reqs {
		if lines[i], err = event.Marshal(ev); err != nil {
			b.Fatal(err)
		}
		if err := w.Write(ev); err != nil {
			b.Fatal(err)
		}
		if (i+1)%64 == 0 {
			if err := w.Flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}

	base := measure(func() {
		for range b.N {
			for _, line := range lines {
				if _, err := event.Unmarshal(line); err != nil {
					b.Fatal(err)
				}
			}
		}
	})

	b.ResetTimer()
	var emitted int
	got := measure(func() {
		for range b.N {
			rp := NewReplay(path, ReplayOptions{Speed: MaxSpeed})
			if err := rp.Run(context.Background(), func(event.Event) { emitted++ }); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.StopTimer()
	if want := b.N * (1 + len(reqs)); emitted != want {
		b.Fatalf("replay emitted %d events, want %d", emitted, want)
	}

	tokens := float64(b.N * len(reqs) * tokensPerRequest)
	if got.cpu > 0 {
		b.ReportMetric(tokens/got.cpu.Seconds(), "tokens/s")
	}
	b.ReportMetric(float64(got.wall)/tokens, "ns/token")
	b.ReportMetric(ratio(got.cpu, base.cpu), "x-unmarshal")
}
