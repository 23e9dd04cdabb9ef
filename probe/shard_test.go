package probe

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

func TestParseShard(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Shard
		ok   bool
	}{
		{"", Shard{}, true},
		{"0/3", Shard{0, 3}, true},
		{"2/3", Shard{2, 3}, true},
		{"0/1", Shard{0, 1}, true},
		{"3/3", Shard{}, false},
		{"-1/3", Shard{}, false},
		{"1/0", Shard{}, false},
		{"1", Shard{}, false},
		{"a/b", Shard{}, false},
	} {
		got, err := ParseShard(c.in)
		if (err == nil) != c.ok || c.ok && got != c.want {
			t.Errorf("ParseShard(%q) = %v, %v; want %v, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestSharesAddUpToTheWhole(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7, 100, 101} {
		for count := 1; count <= 5; count++ {
			sum := 0
			for i := range count {
				sum += Shard{i, count}.Share(n)
			}
			if sum != n {
				t.Errorf("%d things in %d shards: shares add up to %d", n, count, sum)
			}
		}
	}
}

// The fleet's arrivals are exactly one agent's at the whole rate: the
// union of the shards' due times is the whole schedule, each arrival once.
func TestShardedArrivalsAreTheWholeSchedule(t *testing.T) {
	for _, arrival := range []string{ArrivalPoisson, ArrivalConstant, ArrivalGamma} {
		const rate, seed, n, shards = 30.0, 42, 900, 3
		whole, err := NewPacer(arrival, rate, 0.5*boolf(arrival == ArrivalGamma), seed)
		if err != nil {
			t.Fatal(err)
		}
		var want []time.Duration
		for h := range uint64(n) {
			d, _ := whole.Pace(0, h)
			want = append(want, d)
		}
		var got []time.Duration
		for i := range shards {
			p, err := NewPacer(arrival, rate, 0.5*boolf(arrival == ArrivalGamma), seed)
			if err != nil {
				t.Fatal(err)
			}
			sp := ShardPacer{Whole: p, Shard: Shard{i, shards}}
			for h := range uint64(n / shards) {
				d, _ := sp.Pace(0, h)
				got = append(got, d)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the shards' arrivals differ from the whole schedule's", arrival)
		}
	}
}

// nopDoer answers nothing: these tests only build Runners.
type nopDoer struct{}

func (nopDoer) Do(context.Context, RequestSpec) *event.Request { return nil }

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func TestRunnerTakesItsShare(t *testing.T) {
	prompts := loadTestPrompts(t)
	r, err := NewRunner(nopDoer{}, LoadConfig{Concurrency: 8, Requests: 100, Shard: Shard{2, 3}}, prompts)
	if err != nil {
		t.Fatal(err)
	}
	if r.cfg.Concurrency != 2 || r.total != 33 {
		t.Errorf("shard 2/3 of 8 streams and 100 requests: %d streams, %d requests; want 2 and 33", r.cfg.Concurrency, r.total)
	}
	r, err = NewRunner(nopDoer{}, LoadConfig{Rate: 9, Requests: 100, Shard: Shard{0, 3}}, prompts)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.pacer.(ShardPacer); !ok || r.total != 34 {
		t.Errorf("shard 0/3 in open loop: pacer %T, %d requests; want a ShardPacer and 34", r.pacer, r.total)
	}
	if _, err := NewRunner(nopDoer{}, LoadConfig{Concurrency: 2, Shard: Shard{2, 3}}, prompts); err == nil {
		t.Error("shard 2/3 of 2 streams: no error, want one saying none are left")
	}
}

// A run given a start time waits for it (on the Runner's pause, which the
// test holds), and one whose start time is past begins at once.
func TestRunWaitsForItsStartTime(t *testing.T) {
	var waited []time.Duration
	r, err := NewRunner(nopDoer{}, LoadConfig{Concurrency: 1, StartAt: time.Now().Add(time.Hour)}, loadTestPrompts(t))
	if err != nil {
		t.Fatal(err)
	}
	r.pause = func(_ context.Context, d time.Duration) bool { waited = append(waited, d); return true }
	r.waitForStart(t.Context())
	if len(waited) != 1 || waited[0] < 59*time.Minute || waited[0] > time.Hour {
		t.Errorf("waited %v for a start an hour ahead", waited)
	}
	waited = nil
	r.cfg.StartAt = time.Now().Add(-time.Minute)
	r.waitForStart(t.Context())
	if len(waited) != 0 {
		t.Errorf("waited %v for a start already past", waited)
	}
}
