package bench

import (
	"math"
	"testing"
	"time"
)

func TestFrameErrors(t *testing.T) {
	t.Parallel()
	base := time.Unix(1000, 0)
	us := time.Microsecond
	// Server flushes at 10 ms, 20 ms, 30 ms, 40 ms after base.
	truth := []time.Time{base.Add(10 * time.Millisecond), base.Add(20 * time.Millisecond), base.Add(30 * time.Millisecond), base.Add(40 * time.Millisecond)}
	start := base.Add(2 * time.Millisecond)
	// Client sees them 50 µs, 80 µs, 40 µs and 60 µs late.
	arrivals := []time.Duration{8*time.Millisecond + 50*us, 18*time.Millisecond + 80*us, 28*time.Millisecond + 40*us, 38*time.Millisecond + 60*us}

	ttft, itl, ok := FrameErrors(start, arrivals, truth)
	if !ok {
		t.Fatal("ok = false")
	}
	if ttft != 50*us {
		t.Errorf("ttft error = %s, want 50µs", ttft)
	}
	want := []time.Duration{30 * us, 40 * us, 20 * us}
	if len(itl) != len(want) {
		t.Fatalf("itl = %v, want %v", itl, want)
	}
	for i := range want {
		if itl[i] != want[i] {
			t.Errorf("itl[%d] = %s, want %s", i, itl[i], want[i])
		}
	}

	// An early client clock gives a negative TTFT error; SummarizeAbs takes |x|.
	ttft, _, _ = FrameErrors(start, []time.Duration{8 * time.Millisecond}, truth[:1])
	if ttft != 0 {
		t.Errorf("ttft = %s, want 0", ttft)
	}
	ttft, itl, ok = FrameErrors(start, []time.Duration{7 * time.Millisecond, 17 * time.Millisecond}, truth)
	if !ok || ttft != -time.Millisecond || len(itl) != 1 || itl[0] != 0 {
		t.Errorf("fewer client frames: ttft %s itl %v ok %v, want -1ms [0] true", ttft, itl, ok)
	}
	if _, _, ok := FrameErrors(start, nil, truth); ok {
		t.Error("no client frames: ok = true")
	}
}

func TestSummarizeAbs(t *testing.T) {
	t.Parallel()
	var errs []time.Duration
	for i := 1; i <= 100; i++ {
		d := time.Duration(i) * time.Microsecond
		if i%2 == 0 {
			d = -d
		}
		errs = append(errs, d)
	}
	got := SummarizeAbs(errs)
	if got.N != 100 || got.MeanUs != 50.5 || got.P99Us != 99 || got.MaxUs != 100 {
		t.Errorf("got %+v, want n 100 mean 50.5 p99 99 max 100", got)
	}
	if errs[1] != -2*time.Microsecond {
		t.Error("SummarizeAbs changed its input")
	}
	if got := SummarizeAbs([]time.Duration{-7 * time.Microsecond}); got.P99Us != 7 || got.MeanUs != 7 {
		t.Errorf("one value: %+v", got)
	}
	if got := SummarizeAbs(nil); got != (ErrorStats{}) {
		t.Errorf("empty: %+v", got)
	}
}

func TestRatio(t *testing.T) {
	t.Parallel()
	if r := Ratio(ratio(3, 2)); r.String() != "1.50x" {
		t.Errorf("3/2 = %s", r)
	}
	r := Ratio(ratio(1, 0))
	if r.Valid() || r.String() != "n/a" || !math.IsNaN(float64(r)) {
		t.Errorf("1/0 = %v", r)
	}
	if b, _ := r.MarshalJSON(); string(b) != "null" {
		t.Errorf("json of 1/0 = %s", b)
	}
}

func TestGroundTruthOutOfOrder(t *testing.T) {
	t.Parallel()
	g := NewGroundTruth()
	base := time.Unix(5, 0)
	g.Record("a", 2, base.Add(2))
	g.Record("a", 0, base)
	g.Record("a", -1, base)
	g.Record("b", 0, base)
	got := g.Frames("a")
	if len(got) != 3 || !got[0].Equal(base) || !got[1].IsZero() || !got[2].Equal(base.Add(2)) {
		t.Fatalf("frames(a) = %v", got)
	}
	if c := contiguous(got); len(c) != 1 {
		t.Errorf("contiguous = %d frames, want 1 (gap at 1)", len(c))
	}
	if g.Frames("zzz") != nil {
		t.Error("unknown id has frames")
	}
}
