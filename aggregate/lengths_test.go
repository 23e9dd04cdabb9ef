package aggregate

import (
	"testing"
	"time"
)

func TestLengthBuckets(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ n, k, lo, hi int }{
		{0, 0, 0, 0}, {1, 1, 1, 1}, {2, 2, 2, 2}, {3, 3, 3, 4}, {4, 3, 3, 4}, {5, 4, 5, 8},
		{512, 10, 257, 512}, {513, 11, 513, 1024}, {1 << 30, maxLengthBuckets - 1, 1<<(maxLengthBuckets-3) + 1, 0},
	} {
		k := lengthBucket(c.n)
		lo, hi := lengthBounds(k)
		if k != c.k || lo != c.lo || hi != c.hi {
			t.Errorf("%d tokens: bucket %d [%d, %d], want %d [%d, %d]", c.n, k, lo, hi, c.k, c.lo, c.hi)
		}
	}
}

// Requests whose TTFT grows with their prompt are told apart by prompt
// length: the long prompts' p99 is above the short ones', while the
// overall p99 is the long ones' alone.
func TestSummaryByPromptLength(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	t0 := base()
	for i := range 400 {
		prompt := 100 + (i%4)*300 // 100, 400, 700, 1000 tokens
		r := okReq(t0.Add(time.Duration(i)*10*time.Millisecond), time.Duration(prompt)*50*time.Microsecond+time.Duration(i%7)*time.Millisecond, time.Millisecond, 8)
		r.PromptTokens, r.OutputTokens = prompt, 8
		addAll(a, r)
	}
	s := a.Summary()
	if s.ByLength == nil || len(s.ByLength.Prompt) != 3 || len(s.ByLength.Output) != 1 {
		t.Fatalf("by length = %+v, want 3 prompt buckets and 1 output bucket", s.ByLength)
	}
	var total int64
	for _, b := range s.ByLength.Prompt {
		total += b.Count
	}
	short, long := s.ByLength.Prompt[0], s.ByLength.Prompt[2]
	if total != s.TTFT.Count || short.Label() != "65-128" || long.Label() != "513-1024" {
		t.Fatalf("buckets %s and %s, %d requests; want 65-128 and 513-1024, %d", short.Label(), long.Label(), total, s.TTFT.Count)
	}
	if long.TTFT.P99 <= short.TTFT.P99 || short.TTFT.P99 > 12 {
		t.Errorf("ttft p99: short prompts %.2f ms, long %.2f ms; want the long ones' above and the short ones' ≤ 12 ms", short.TTFT.P99, long.TTFT.P99)
	}
}
