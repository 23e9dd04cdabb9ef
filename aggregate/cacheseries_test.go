package aggregate

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// A prefix cache that hits for the first minute and then evicts: the
// series' hit rate falls and its TTFT rises, the server's counters agree,
// the windows' hit rate is the last minute's, and the series stays within
// its bound of buckets however long the run.
func TestCacheSeriesHitRateFallsWhenTheCacheEvicts(t *testing.T) {
	a := New(Config{})
	at := base()
	const secs = 150
	for sec := range secs {
		now := at.Add(time.Duration(sec) * time.Second)
		cached, ttft := 900, 50*time.Millisecond
		if sec >= 60 {
			cached, ttft = 100, 250*time.Millisecond
		}
		addAll(a, turnReq(now.Add(500*time.Millisecond), 2, 1000, cached, ttft, ttft/2))
		q, h := 1000.0, float64(cached)
		a.Add(event.NewServer(&event.ServerSample{Time: now.Add(600 * time.Millisecond), Source: "m", Interval: time.Second, PrefixQueries: &q, PrefixHits: &h}))
	}
	snap := a.Snapshot(at.Add(secs * time.Second))
	tu := snap.Turns
	if tu == nil || len(tu.Series) == 0 || len(tu.Series) > cacheSeriesMax {
		t.Fatalf("series %+v", tu)
	}
	first, last := tu.Series[0], tu.Series[len(tu.Series)-1]
	if first.HitRate == nil || *first.HitRate != 0.9 || last.HitRate == nil || *last.HitRate != 0.1 {
		t.Errorf("hit rate first %v last %v, want 0.9 then 0.1", first.HitRate, last.HitRate)
	}
	if first.ServerHitRate == nil || *first.ServerHitRate != 0.9 || last.ServerHitRate == nil || *last.ServerHitRate != 0.1 {
		t.Errorf("server hit rate first %v last %v", first.ServerHitRate, last.ServerHitRate)
	}
	if *first.TTFTMean != 50 || *last.TTFTMean != 250 {
		t.Errorf("ttft mean first %v last %v", *first.TTFTMean, *last.TTFTMean)
	}
	if want := (60*900.0 + 90*100) / (150 * 1000); tu.HitRate != want || tu.ServerHitRate == nil || *tu.ServerHitRate != want {
		t.Errorf("run hit rate %v / %v, want %v", tu.HitRate, tu.ServerHitRate, want)
	}
	win := snap.Windows[Win1m]
	if win.CacheHitRate != 0.1 || win.Traffic.PrefixHitRate != 0.1 {
		t.Errorf("1m window hit rate %v (server %v), want 0.1", win.CacheHitRate, win.Traffic.PrefixHitRate)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, snap.Summary()); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "Prefix cache over time") || !strings.Contains(out, "Prefix cache hit rate 42.0%") {
		t.Errorf("table lacks the cache series:\n%s", out)
	}
}

// Times before the series' origin, zero times and bad counters neither
// panic nor leave the bound.
func TestCacheSeriesBadInput(t *testing.T) {
	var s cacheSeries
	at := base()
	s.addRequest(time.Time{}, 10, 5, time.Millisecond)
	s.addRequest(at, 10, 5, time.Millisecond)
	s.addRequest(at.Add(-time.Hour), 10, 5, time.Millisecond)
	s.addRequest(at.Add(1000*time.Hour), 10, 5, time.Millisecond)
	neg := -1.0
	s.addServer(&event.ServerSample{Time: at, Interval: time.Second, PrefixQueries: &neg, PrefixHits: &neg})
	if len(s.buckets) > cacheSeriesMax || s.buckets[0].n != 2 {
		t.Fatalf("%d buckets, first %+v", len(s.buckets), s.buckets[0])
	}
	if pts := s.points(); len(pts) != 2 {
		t.Errorf("points %+v", pts)
	}
}
