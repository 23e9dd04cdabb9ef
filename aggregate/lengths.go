package aggregate

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"text/tabwriter"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/latscope/latscope/event"
)

// Results by length: a long prompt's TTFT tail hides in the overall p99
// when most prompts are short. The finished requests are also filed by
// their prompt length and by their output length, each into buckets that
// double (1, 2, 3–4, 5–8, …, 513–1024 tokens, …): automatic, bounded in
// number whatever the run, and alike between runs so two runs' buckets
// compare. Only the whole run is kept, and its statistics are worked out
// once, when the run ends (Final).

// maxLengthBuckets bounds the buckets: the last holds everything from
// 2^(maxLengthBuckets-3)+1 tokens up (over 512K tokens).
const maxLengthBuckets = 22

// LengthBucket is the statistics of the successful requests whose length
// (prompt or output tokens) is within [Lo, Hi].
type LengthBucket struct {
	Lo    int   `json:"lo"`
	Hi    int   `json:"hi"` // 0: no upper bound
	Count int64 `json:"count"`
	TTFT  Stats `json:"ttft"`
	TPOT  Stats `json:"tpot"`
	E2E   Stats `json:"e2e"`
}

// ByLength is the run's results by prompt length and by output length,
// the non-empty buckets in increasing length.
type ByLength struct {
	Prompt []LengthBucket `json:"prompt"`
	Output []LengthBucket `json:"output"`
}

// Empty reports whether no request was filed.
func (b *ByLength) Empty() bool { return b == nil || len(b.Prompt) == 0 && len(b.Output) == 0 }

// lengthCell holds one bucket's values.
type lengthCell struct {
	n                int64
	ttft, tpot, e2e  tally
	hTTFT, hTPOT, hE *hdr.Histogram // made on a bucket's first value
}

// lengthFiles files requests by prompt and by output length.
type lengthFiles struct {
	prompt, output [maxLengthBuckets]*lengthCell
}

// lengthBucket returns the bucket of n tokens: 0 for 0 or fewer, k for
// 2^(k-2) < n ≤ 2^(k-1).
func lengthBucket(n int) int {
	if n <= 0 {
		return 0
	}
	return min(bits.Len(uint(n-1))+1, maxLengthBuckets-1)
}

// lengthBounds is bucket k's range; hi 0 is unbounded.
func lengthBounds(k int) (lo, hi int) {
	switch {
	case k == 0:
		return 0, 0
	case k == 1:
		return 1, 1
	case k == maxLengthBuckets-1:
		return 1<<(k-2) + 1, 0
	}
	return 1<<(k-2) + 1, 1 << (k - 1)
}

// add files a successful request.
func (f *lengthFiles) add(r *event.Request) {
	for _, c := range []**lengthCell{&f.prompt[lengthBucket(r.PromptTokens)], &f.output[lengthBucket(r.OutputTokens)]} {
		if *c == nil {
			*c = &lengthCell{}
		}
		(*c).add(r)
	}
}

func (c *lengthCell) add(r *event.Request) {
	c.n++
	record := func(t *tally, h **hdr.Histogram, d int64) {
		if d <= 0 {
			return
		}
		d, _ = clamp(d)
		if *h == nil {
			*h = hdr.New(histLowest, histHighest, slotDigits)
		}
		t.add(d)
		_ = (*h).RecordValue(d)
	}
	record(&c.ttft, &c.hTTFT, int64(r.TTFT/1000))
	record(&c.tpot, &c.hTPOT, int64(r.TPOT()/1000))
	record(&c.e2e, &c.hE, int64(r.E2E/1000))
}

// summary works out the buckets' statistics.
func (f *lengthFiles) summary() *ByLength {
	out := &ByLength{Prompt: lengthStats(&f.prompt), Output: lengthStats(&f.output)}
	if out.Empty() {
		return nil
	}
	return out
}

// counts is the buckets with their counts alone: cheap enough for every
// live snapshot (the dashboard's filter line names them).
func (f *lengthFiles) counts() *ByLength {
	out := &ByLength{Prompt: lengthCounts(&f.prompt), Output: lengthCounts(&f.output)}
	if out.Empty() {
		return nil
	}
	return out
}

func lengthCounts(cells *[maxLengthBuckets]*lengthCell) []LengthBucket {
	var out []LengthBucket
	for k, c := range cells {
		if c != nil {
			lo, hi := lengthBounds(k)
			out = append(out, LengthBucket{Lo: lo, Hi: hi, Count: c.n})
		}
	}
	return out
}

func lengthStats(cells *[maxLengthBuckets]*lengthCell) []LengthBucket {
	var out []LengthBucket
	stats := func(t tally, h *hdr.Histogram) Stats {
		if t.n == 0 {
			return Stats{}
		}
		return finishStats(t, h.ValueAtPercentilesSlice(statsPercentiles[:]))
	}
	for k, c := range cells {
		if c == nil {
			continue
		}
		lo, hi := lengthBounds(k)
		out = append(out, LengthBucket{Lo: lo, Hi: hi, Count: c.n,
			TTFT: stats(c.ttft, c.hTTFT), TPOT: stats(c.tpot, c.hTPOT), E2E: stats(c.e2e, c.hE)})
	}
	return out
}

// Label names the bucket's range of tokens: "257-512", "1", "1048577+".
func (b LengthBucket) Label() string {
	switch {
	case b.Hi == 0 && b.Lo == 0:
		return "0"
	case b.Hi == 0:
		return strconv.Itoa(b.Lo) + "+"
	case b.Lo == b.Hi:
		return strconv.Itoa(b.Lo)
	}
	return strconv.Itoa(b.Lo) + "-" + strconv.Itoa(b.Hi)
}

// Contains reports whether n tokens fall in the bucket.
func (b LengthBucket) Contains(n int) bool { return n >= b.Lo && (b.Hi == 0 || n <= b.Hi) }

// ParseLengthRange reads a bucket's label back ("513-1024", "1025+", "7"),
// or any range written the same way, as the bucket it names (no counts).
func ParseLengthRange(s string) (LengthBucket, error) {
	bad := fmt.Errorf("%q: want a token range such as 513-1024, 1025+ or 7", s)
	if lo, ok := strings.CutSuffix(s, "+"); ok {
		n, err := strconv.Atoi(lo)
		if err != nil || n < 0 {
			return LengthBucket{}, bad
		}
		return LengthBucket{Lo: n}, nil
	}
	loText, hiText, ranged := strings.Cut(s, "-")
	if !ranged {
		hiText = loText
	}
	lo, err1 := strconv.Atoi(loText)
	hi, err2 := strconv.Atoi(hiText)
	if err1 != nil || err2 != nil || lo < 0 || hi < lo || hi == 0 {
		return LengthBucket{}, bad
	}
	return LengthBucket{Lo: lo, Hi: hi}, nil
}

// writeByLength prints the TTFT, TPOT and E2E of each length bucket, for
// prompts and outputs of more than one bucket (one bucket says nothing the
// latency table does not).
func writeByLength(w *errWriter, b *ByLength) {
	for _, part := range []struct {
		what    string
		buckets []LengthBucket
	}{{"prompt", b.Prompt}, {"output", b.Output}} {
		if len(part.buckets) < 2 {
			continue
		}
		w.printf("\nBy %s length (tokens; successful requests; ms)\n", part.what)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "  %s\tcount\tttft p50\tttft p99\ttpot p50\ttpot p99\te2e p50\te2e p99\t\n", part.what)
		for _, k := range part.buckets {
			fmt.Fprintf(tw, "  %s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", k.Label(), k.Count,
				k.TTFT.P50, k.TTFT.P99, k.TPOT.P50, k.TPOT.P99, k.E2E.P50, k.E2E.P99)
		}
		_ = tw.Flush()
	}
}
