package aggregate

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func quantity(name string, values ...float64) RepeatedQuantity {
	return NewRepeatedQuantity(name, name, "ms", values)
}

func TestCompareRepeatedDecides(t *testing.T) {
	t.Parallel()
	base := []RepeatedQuantity{
		quantity("same", 100, 104, 98, 101, 97),
		quantity("slower", 100, 101, 99, 100, 100),
		quantity("flat", 0, 0, 0, 0, 0),
		quantity("few", 10),
	}
	other := []RepeatedQuantity{
		quantity("same", 99, 103, 100, 102, 96),
		quantity("slower", 130, 131, 129, 130, 131),
		quantity("flat", 0, 0, 0, 0, 0),
		quantity("few", 11, 12),
		quantity("new", 1, 2),
	}
	got := map[string]RepeatedChange{}
	var order []string
	for _, c := range CompareRepeated(base, other) {
		got[c.Name] = c
		order = append(order, c.Name)
	}
	if strings.Join(order, " ") != "same slower flat few new" {
		t.Errorf("order %v", order)
	}
	if c := got["same"]; !c.Tested() || c.Significant || !strings.HasPrefix(c.Verdict(), "no significant change") {
		t.Errorf("same distribution: %+v %s", c, c.Verdict())
	}
	checkHolmAdjusted(t, got)
	if c := got["slower"]; !c.Significant || math.Abs(c.DeltaPct-30) > 0.5 || !strings.HasPrefix(c.Verdict(), "significant change") {
		t.Errorf("30%% slower: %+v %s", c, c.Verdict())
	}
	if c := got["flat"]; c.P != 1 || c.Significant {
		t.Errorf("zero in every run of both: %+v", c)
	}
	if c := got["few"]; c.Tested() || !strings.Contains(c.Untested(), "2 runs or more") {
		t.Errorf("one run on a side cannot be tested: %+v %q", c, c.Untested())
	}
	if c := got["new"]; c.Tested() || c.Base.N != 0 {
		t.Errorf("only in other: %+v", c)
	}
}

// checkHolmAdjusted checks each tested change shows its Holm-adjusted p,
// which is never below the raw one.
func checkHolmAdjusted(t *testing.T, changes map[string]RepeatedChange) {
	t.Helper()
	for _, c := range changes {
		if !c.Tested() {
			continue
		}
		if !(c.PHolm >= c.P && c.PHolm <= 1) || !strings.Contains(c.Verdict(), "after Holm") {
			t.Errorf("%s: p %g, after Holm %g: %s", c.Name, c.P, c.PHolm, c.Verdict())
		}
	}
}

// TestCompareRepeatedFalseAlarms compares many pairs of run sets drawn
// from one distribution: the family-wise rate of any significant quantity
// stays near (at most) the 5 % it promises.
func TestCompareRepeatedFalseAlarms(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 8))
	draw := func() []RepeatedQuantity {
		var qs []RepeatedQuantity
		for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
			vs := make([]float64, 5)
			for i := range vs {
				vs[i] = 50 + 3*rng.NormFloat64()
			}
			qs = append(qs, quantity(name, vs...))
		}
		return qs
	}
	const trials = 2000
	alarms := 0
	for range trials {
		for _, c := range CompareRepeated(draw(), draw()) {
			if c.Significant {
				alarms++
				break
			}
		}
	}
	if rate := float64(alarms) / trials; rate > 0.07 {
		t.Errorf("false alarms in %.1f%% of same-distribution comparisons, want at most about 5%%", 100*rate)
	}
}

func TestWriteRepeatedComparison(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	same := CompareRepeated([]RepeatedQuantity{quantity("ttft", 100, 104, 98)}, []RepeatedQuantity{quantity("ttft", 99, 103, 100)})
	if err := WriteRepeatedComparison(&b, same); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "Result: no significant change.") || !strings.Contains(out, "Welch") {
		t.Errorf("same runs:\n%s", out)
	}
	b.Reset()
	moved := CompareRepeated([]RepeatedQuantity{quantity("ttft", 100, 101, 99)}, []RepeatedQuantity{quantity("ttft", 150, 151, 149)})
	if err := WriteRepeatedComparison(&b, moved); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "+50.00 ms (+50.0%)") || !strings.Contains(out, "Result: 1 of 1 quantities changed significantly.") {
		t.Errorf("moved runs:\n%s", out)
	}
}

func TestCompareRepeatedHostileValues(t *testing.T) {
	t.Parallel()
	doc := `{"repeated":{"headline":[{"name":"huge","values":[1e308,1e308,-1e308]},{"name":"empty","values":[]},{"name":"tiny","values":[5e-324,0]}]}}`
	qs, err := ReadRepeated(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	changes := CompareRepeated(qs, qs)
	var b bytes.Buffer
	if err := WriteRepeatedComparison(&b, changes); err != nil {
		t.Fatal(err)
	}
	for _, c := range changes {
		if c.Significant {
			t.Errorf("%s compared with itself: significant (p=%g)", c.Name, c.P)
		}
	}
}
