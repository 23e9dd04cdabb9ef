package backoff

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestCeilingDoublesUpToMax(t *testing.T) {
	t.Parallel()
	p := Policy{First: 100 * time.Millisecond, Max: time.Second}
	for n, want := range map[int]time.Duration{
		-1: 0, 0: 0, 1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond,
		5: time.Second, 60: time.Second, math.MaxInt: time.Second,
	} {
		if got := p.Ceiling(n); got != want {
			t.Errorf("Ceiling(%d) = %v, want %v", n, got, want)
		}
	}
	// A Max below First caps the first pause too; a Max near the largest
	// duration does not overflow the doubling.
	if got := (Policy{First: time.Second, Max: time.Millisecond}).Ceiling(1); got != time.Millisecond {
		t.Errorf("Max below First: Ceiling(1) = %v, want 1ms", got)
	}
	huge := Policy{First: time.Nanosecond, Max: math.MaxInt64}
	if got := huge.Ceiling(100); got != math.MaxInt64 {
		t.Errorf("huge Max: Ceiling(100) = %v, want %v", got, time.Duration(math.MaxInt64))
	}
	if got := (Policy{Max: time.Second}).Ceiling(3); got != 0 {
		t.Errorf("zero First: Ceiling(3) = %v, want 0", got)
	}
}

func TestDelayIsJitteredWithinCeiling(t *testing.T) {
	t.Parallel()
	p := Policy{First: 100 * time.Millisecond, Max: time.Second}
	seeded := rand.New(rand.NewPCG(1, 2))
	for _, rng := range []*rand.Rand{nil, seeded} {
		for n := 1; n <= 6; n++ {
			ceiling := p.Ceiling(n)
			seen := map[time.Duration]bool{}
			for range 200 {
				d := p.Delay(n, rng)
				if d < ceiling/2 || d > ceiling {
					t.Fatalf("n %d (seeded %v): waited %v, want within [%v, %v]", n, rng != nil, d, ceiling/2, ceiling)
				}
				seen[d] = true
			}
			if len(seen) < 10 {
				t.Fatalf("n %d (seeded %v): %d distinct waits in 200: not jittered", n, rng != nil, len(seen))
			}
		}
	}
	if d := (Policy{}).Delay(1, nil); d != 0 {
		t.Errorf("zero policy: Delay = %v, want 0", d)
	}
}

// TestDelayReproducibleFromSeed: two sources with the same seed give the
// same pauses, so a seeded run's load is repeatable.
func TestDelayReproducibleFromSeed(t *testing.T) {
	t.Parallel()
	p := Policy{First: 50 * time.Millisecond, Max: 5 * time.Second}
	a, b := rand.New(rand.NewPCG(7, 9)), rand.New(rand.NewPCG(7, 9))
	for n := 1; n <= 20; n++ {
		if da, db := p.Delay(n, a), p.Delay(n, b); da != db {
			t.Fatalf("n %d: %v and %v from the same seed", n, da, db)
		}
	}
}
