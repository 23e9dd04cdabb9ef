package agent

import (
	"slices"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// The load of the benchmark: 200 requests/s of 128-token streams, one
// request record (128 chunks, about 5 KB of JSON) per request.
const (
	benchRate    = 200
	benchClients = 10
	// benchWarmup is published before the timed part so that the client
	// that never reads has full socket buffers (about 15 MB) and its writer
	// is blocked for the whole measurement.
	benchWarmup = 3000
)

// BenchmarkAgent publishes at 200 requests/s to 10 attached clients while
// an 11th client that never reads is connected, against a baseline of the
// same rate with no client. Every attached client must get every event:
// the benchmark fails on any loss. Run it with a fixed count, e.g.
//
//	go test -run '^$' -bench BenchmarkAgent -benchtime 400x ./agent
//
// It reports events/s delivered per client, loss, the publish rate
// achieved, and Publish's latency (p50, p99, max). The unpaced variant
// publishes as fast as it can, to show the headroom.
func BenchmarkAgent(b *testing.B) {
	b.Run("baseline-no-clients", func(b *testing.B) { benchAgent(b, 0, true) })
	b.Run("10-clients+1-stuck", func(b *testing.B) { benchAgent(b, benchClients, true) })
	b.Run("unpaced-10-clients+1-stuck", func(b *testing.B) { benchAgent(b, benchClients, false) })
}

func benchAgent(b *testing.B, clients int, paced bool) {
	warmup := 0
	if clients > 0 {
		warmup = benchWarmup
	}
	a := startAgent(b, Config{Ring: RingConfig{MaxEvents: 1 + warmup + b.N}, WriteTimeout: time.Hour})
	var attachedClients []*attached
	if clients > 0 {
		stuckClient(b, a.addr, "")
		for range clients {
			c := attach(b, ClientConfig{URL: a.url})
			c.untilState(b, Streaming)
			attachedClients = append(attachedClients, c)
		}
	}
	publishAll(b, a.Server, sessionEvent("bench"))
	publishAll(b, a.Server, requests(0, warmup)...)
	for _, c := range attachedClients {
		for range 1 + warmup {
			<-c.events
		}
	}
	evs := requests(warmup, b.N)

	latencies := make([]time.Duration, 0, b.N)
	interval := time.Second / benchRate
	b.ResetTimer()
	start := time.Now()
	for i, ev := range evs {
		if paced {
			time.Sleep(time.Until(start.Add(time.Duration(i) * interval))) // open loop: no drift
		}
		t := time.Now()
		if err := a.Publish(ev); err != nil {
			b.Fatal(err)
		}
		latencies = append(latencies, time.Since(t))
	}
	published := time.Since(start)
	a.End()
	var delivered, lost int64
	for i, c := range attachedClients {
		got, err := c.finish(b)
		if err != nil {
			b.Fatalf("client %d: %v", i, err)
		}
		for _, ev := range got {
			if ev.Kind == event.KindLoss {
				lost += ev.Loss.Events
			}
		}
		if len(got) != b.N || c.Status().Lost != 0 {
			b.Fatalf("client %d got %d of %d events (lost %d)", i, len(got), b.N, c.Status().Lost)
		}
		delivered += int64(len(got))
	}
	elapsed := time.Since(start)
	b.StopTimer()

	slices.Sort(latencies)
	q := func(p float64) float64 { return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) }
	b.ReportMetric(float64(b.N)/published.Seconds(), "published/s")
	if clients > 0 {
		b.ReportMetric(float64(delivered)/float64(clients)/elapsed.Seconds(), "events/s/client")
		b.ReportMetric(float64(lost), "lost")
	}
	b.ReportMetric(q(0.5), "publish-p50-µs")
	b.ReportMetric(q(0.99), "publish-p99-µs")
	b.ReportMetric(q(1), "publish-max-µs")
}
