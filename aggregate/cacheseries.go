package aggregate

import (
	"math"
	"time"

	"github.com/latscope/latscope/event"
)

// The prefix cache over time: the run cut into at most cacheSeriesMax
// buckets of equal width (one second to begin with; when the run outgrows
// them, neighbours merge and the width doubles, so memory stays fixed).
// Each bucket has the client's view (cached tokens over prompt tokens of
// the successful requests that ended in it, as the server reported them
// per request) and the server's (its prefix-cache counters' hits over
// queries, from the scrapes in it), and the TTFT of those requests: a
// cache that starts evicting shows as the hit rate falling while TTFT
// rises.

// cacheSeriesMax bounds the series' buckets.
const cacheSeriesMax = 60

// cacheBucket is one bucket's sums.
type cacheBucket struct {
	n, prompt, cached, uncached int64
	ttftUs, ttftN               int64
	serverQ, serverH            float64
	hasServer                   bool
}

func (b *cacheBucket) merge(o *cacheBucket) {
	b.n += o.n
	b.prompt += o.prompt
	b.cached += o.cached
	b.uncached += o.uncached
	b.ttftUs += o.ttftUs
	b.ttftN += o.ttftN
	b.serverQ += o.serverQ
	b.serverH += o.serverH
	b.hasServer = b.hasServer || o.hasServer
}

// cacheSeries is the buckets, from origin on.
type cacheSeries struct {
	origin  time.Time
	width   time.Duration
	buckets []cacheBucket
}

// at returns the bucket of t, growing or coarsening the series as needed
// (nil for a zero time). A time before the origin falls in the first.
func (s *cacheSeries) at(t time.Time) *cacheBucket {
	if t.IsZero() {
		return nil
	}
	if s.origin.IsZero() {
		s.origin, s.width = t.Truncate(time.Second), time.Second
	}
	k := int64(0)
	if d := t.Sub(s.origin); d > 0 {
		k = int64(d / s.width)
	}
	for k >= cacheSeriesMax {
		s.coarsen()
		k /= 2
	}
	for int64(len(s.buckets)) <= k {
		s.buckets = append(s.buckets, cacheBucket{})
	}
	return &s.buckets[k]
}

// coarsen merges neighbouring buckets and doubles the width.
func (s *cacheSeries) coarsen() {
	half := (len(s.buckets) + 1) / 2
	for i := range half {
		b := s.buckets[2*i]
		if 2*i+1 < len(s.buckets) {
			b.merge(&s.buckets[2*i+1])
		}
		s.buckets[i] = b
	}
	clear(s.buckets[half:])
	s.buckets = s.buckets[:half]
	s.width *= 2
}

// addRequest files a successful request's prompt, cached tokens and TTFT
// at its end.
func (s *cacheSeries) addRequest(end time.Time, prompt, cached int, ttft time.Duration) {
	b := s.at(end)
	if b == nil {
		return
	}
	b.n++
	b.prompt += int64(prompt)
	b.cached += int64(cached)
	b.uncached += int64(max(prompt-cached, 0))
	if us, _ := clamp(int64(ttft / time.Microsecond)); us > 0 {
		b.ttftUs += us
		b.ttftN++
	}
}

// addServer files a scrape's prefix-cache counter deltas.
func (s *cacheSeries) addServer(x *event.ServerSample) {
	if x.Stale || x.Error != "" || x.Interval <= 0 || !finite(x.PrefixQueries) || !finite(x.PrefixHits) {
		return
	}
	q, h := *x.PrefixQueries, *x.PrefixHits
	if q < 0 || h < 0 || math.IsInf(q, 0) || math.IsInf(h, 0) {
		return
	}
	b := s.at(x.Time)
	if b == nil {
		return
	}
	b.serverQ += q
	b.serverH += h
	b.hasServer = true
}

// CachePoint is one bucket of the prefix cache over time.
type CachePoint struct {
	// StartS is the bucket's start in seconds from the series' first
	// event, WidthS its width.
	StartS   float64 `json:"start_s"`
	WidthS   float64 `json:"width_s"`
	Requests int64   `json:"requests"`
	// HitRate is the bucket's cached tokens over its prompt tokens (0..1)
	// as the server reported them per request; absent without requests.
	HitRate *float64 `json:"hit_rate,omitempty"`
	// ServerHitRate is the server's prefix-cache counters' hits over
	// queries in the bucket; absent where the server has no such
	// counters or looked nothing up.
	ServerHitRate *float64 `json:"server_hit_rate,omitempty"`
	// TTFTMean is the mean TTFT of the bucket's requests (ms) and
	// TTFTPerUncached their TTFT over their uncached prompt tokens (ms per
	// token, ratio of sums).
	TTFTMean        *float64 `json:"ttft_mean_ms,omitempty"`
	TTFTPerUncached *float64 `json:"ttft_per_uncached_token_ms,omitempty"`
}

func fptr(v float64) *float64 { return &v }

// points returns the series' buckets (empty ones left out).
func (s *cacheSeries) points() []CachePoint {
	var out []CachePoint
	for i, b := range s.buckets {
		if b.n == 0 && !b.hasServer {
			continue
		}
		p := CachePoint{StartS: (time.Duration(i) * s.width).Seconds(), WidthS: s.width.Seconds(), Requests: b.n}
		if b.prompt > 0 {
			p.HitRate = fptr(float64(b.cached) / float64(b.prompt))
		}
		if b.hasServer && b.serverQ > 0 {
			p.ServerHitRate = fptr(min(b.serverH/b.serverQ, 1))
		}
		if b.ttftN > 0 {
			p.TTFTMean = fptr(float64(b.ttftUs) / 1000 / float64(b.ttftN))
		}
		if b.uncached > 0 && b.ttftN > 0 {
			p.TTFTPerUncached = fptr(float64(b.ttftUs) / 1000 / float64(b.uncached))
		}
		out = append(out, p)
	}
	return out
}
