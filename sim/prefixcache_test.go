package sim

import "testing"

// The cache evicts the least recently used block, a lookup counts as a
// use, and the truth counts lookups, hits and evictions as they happened.
func TestPrefixCacheTruthCountsHitsMissesEvictions(t *testing.T) {
	c := newPrefixCache(2)
	c.insert([]uint64{1})
	c.insert([]uint64{2})
	if n := c.lookup([]uint64{1}); n != 1 { // 1 is now the most recent
		t.Fatalf("lookup 1: %d", n)
	}
	c.count(32, 16)
	c.insert([]uint64{3}) // evicts 2, the least recently used
	if n := c.lookup([]uint64{2}); n != 0 {
		t.Errorf("block 2 still cached after eviction")
	}
	c.count(32, 0)
	if n := c.lookup([]uint64{1}); n != 1 {
		t.Errorf("block 1 evicted though used more recently than 2")
	}
	tr := c.snapshot()
	want := PrefixCacheTruth{QueriedTokens: 64, HitTokens: 16, Hits: 1, Misses: 1, Evictions: 1, Blocks: 2, Capacity: 2}
	if tr != want {
		t.Errorf("truth %+v, want %+v", tr, want)
	}
	if tr.HitRate() != 0.25 {
		t.Errorf("hit rate %v", tr.HitRate())
	}
}
