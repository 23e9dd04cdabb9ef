package sim

import (
	"container/list"
	"encoding/binary"
	"hash/fnv"
)

// PrefixBlockTokens is the prefix cache's block size in tokens, vLLM's
// default. Only whole blocks are cached.
const PrefixBlockTokens = 16

// prefixCache remembers which prompt prefixes have been computed, in whole
// blocks, as vLLM's automatic prefix caching does: a block is named by a hash
// of its tokens chained with the hash of the block before it, so equal names
// mean equal prefixes. It holds at most capacity blocks and evicts the least
// recently used. Unlike vLLM it is not tied to the KV cache: a cached block
// costs no KV space. Owned by the engine, under its lock.
type prefixCache struct {
	capacity int
	lru      *list.List               // block hashes, most recently used first
	blocks   map[uint64]*list.Element // hash → its element in lru
	truth    PrefixCacheTruth
}

// PrefixCacheTruth is what the prefix cache did, counted as it happened:
// prompt tokens looked up and found (as the server's
// vllm:prefix_cache_queries_total and _hits_total count them), lookups
// that found some prefix or none, and blocks evicted to make room.
type PrefixCacheTruth struct {
	QueriedTokens int64 `json:"queried_tokens"`
	HitTokens     int64 `json:"hit_tokens"`
	Hits          int64 `json:"hits"`   // lookups that found at least one block
	Misses        int64 `json:"misses"` // lookups that found none
	Evictions     int64 `json:"evicted_blocks"`
	Blocks        int   `json:"blocks"` // cached now
	Capacity      int   `json:"capacity_blocks"`
}

// HitRate is the hit tokens over the queried tokens (0 before any).
func (t PrefixCacheTruth) HitRate() float64 {
	if t.QueriedTokens == 0 {
		return 0
	}
	return float64(t.HitTokens) / float64(t.QueriedTokens)
}

// count records one lookup's outcome in tokens.
func (c *prefixCache) count(prompt, hit int) {
	c.truth.QueriedTokens += int64(prompt)
	c.truth.HitTokens += int64(hit)
	if hit > 0 {
		c.truth.Hits++
	} else {
		c.truth.Misses++
	}
}

func (c *prefixCache) snapshot() PrefixCacheTruth {
	t := c.truth
	t.Blocks, t.Capacity = c.lru.Len(), c.capacity
	return t
}

func newPrefixCache(capacity int) *prefixCache {
	return &prefixCache{capacity: capacity, lru: list.New(), blocks: make(map[uint64]*list.Element)}
}

// lookup returns how many leading blocks of a prompt are cached and marks
// them recently used.
func (c *prefixCache) lookup(hashes []uint64) int {
	n := 0
	for _, h := range hashes {
		el, ok := c.blocks[h]
		if !ok {
			break
		}
		c.lru.MoveToFront(el)
		n++
	}
	return n
}

// insert caches a computed prompt's blocks, evicting the least recently used
// blocks beyond capacity.
func (c *prefixCache) insert(hashes []uint64) {
	for _, h := range hashes {
		if el, ok := c.blocks[h]; ok {
			c.lru.MoveToFront(el)
			continue
		}
		c.blocks[h] = c.lru.PushFront(h)
	}
	for c.lru.Len() > c.capacity {
		oldest := c.lru.Back()
		delete(c.blocks, oldest.Value.(uint64))
		c.lru.Remove(oldest)
		c.truth.Evictions++
	}
}

// blockHashes returns the chained hashes of the whole blocks of a prompt's
// token ids; a trailing partial block is not cached.
func blockHashes(ids []int) []uint64 {
	hashes := make([]uint64, 0, len(ids)/PrefixBlockTokens)
	var prev uint64
	var b [8]byte
	for start := 0; start+PrefixBlockTokens <= len(ids); start += PrefixBlockTokens {
		h := fnv.New64a()
		binary.LittleEndian.PutUint64(b[:], prev)
		h.Write(b[:])
		for _, id := range ids[start : start+PrefixBlockTokens] {
			binary.LittleEndian.PutUint64(b[:], uint64(id))
			h.Write(b[:])
		}
		prev = h.Sum64()
		hashes = append(hashes, prev)
	}
	return hashes
}

// cachedTokens is how much of a prompt of promptTokens tokens with cachedBlocks
// leading blocks in the cache is skipped. Like vLLM, it always computes the
// prompt's last token (its logits give the first output token), so a fully
// cached prompt still prefills its last block.
func cachedTokens(cachedBlocks, promptTokens int) int {
	return min(cachedBlocks, (promptTokens-1)/PrefixBlockTokens) * PrefixBlockTokens
}
