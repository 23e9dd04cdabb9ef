package aggregate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"github.com/latscope/latscope/internal/stats"
)

// RepeatedChange is one headline quantity of two sets of repeated runs.
type RepeatedChange struct {
	Name, Label, Unit string
	// Base and Other are the quantity over each set's runs (N 0 when the
	// set has none).
	Base, Other RepeatedQuantity
	// Delta is Other's mean − Base's; DeltaPct is Delta as a percentage of
	// Base's mean (NaN when that is 0 or missing).
	Delta, DeltaPct float64
	// P is Welch's p-value over the two sets' per-run values, NaN when the
	// test could not run (see Untested).
	P float64
	// PHolm is P adjusted for the number of quantities tested
	// (Holm-Bonferroni): the change is significant when it is at most
	// RepeatAlpha.
	PHolm       float64
	Significant bool
}

// Tested reports whether the test could run.
func (c RepeatedChange) Tested() bool { return !math.IsNaN(c.P) }

// Untested says why the test could not run ("" when it did).
func (c RepeatedChange) Untested() string {
	switch {
	case c.Tested():
		return ""
	case c.Base.N < 2 || c.Other.N < 2:
		return fmt.Sprintf("needs 2 runs or more on each side (%d and %d)", c.Base.N, c.Other.N)
	}
	return "the same value in every run of each side, but different: no spread to judge the change by"
}

// Verdict says in words what the comparison found.
func (c RepeatedChange) Verdict() string {
	switch {
	case !c.Tested():
		return "not tested: " + c.Untested()
	case c.Significant:
		return fmt.Sprintf("significant change (p=%.2g after Holm)", c.PHolm)
	}
	return fmt.Sprintf("no significant change (p=%.2g after Holm)", c.PHolm)
}

// CompareRepeated compares other's runs with base's, quantity by quantity
// (matched by name, in base's order, then those only other has): Welch's
// t-test over the per-run values, Holm-Bonferroni over the quantities
// tested (see RepeatRule).
func CompareRepeated(base, other []RepeatedQuantity) []RepeatedChange {
	byName := func(qs []RepeatedQuantity) map[string]RepeatedQuantity {
		m := make(map[string]RepeatedQuantity, len(qs))
		for _, q := range qs {
			m[q.Name] = q
		}
		return m
	}
	bm, om := byName(base), byName(other)
	names := append([]RepeatedQuantity(nil), base...) // the quantities' names, labels and units, in order
	for _, q := range other {
		if _, ok := bm[q.Name]; !ok {
			names = append(names, q)
		}
	}
	out := make([]RepeatedChange, 0, len(names))
	ps := make([]float64, 0, len(names))
	for _, n := range names {
		b, o := bm[n.Name], om[n.Name]
		if b.N == 0 {
			b = NewRepeatedQuantity(n.Name, n.Label, n.Unit, nil)
		}
		if o.N == 0 {
			o = NewRepeatedQuantity(n.Name, n.Label, n.Unit, nil)
		}
		ch := RepeatedChange{Name: n.Name, Label: n.Label, Unit: n.Unit, Base: b, Other: o,
			Delta: o.Mean - b.Mean, DeltaPct: math.NaN()}
		if b.Mean != 0 && !math.IsNaN(ch.Delta) {
			ch.DeltaPct = 100 * ch.Delta / math.Abs(b.Mean)
		}
		ch.P, _ = stats.Welch(b.Values, o.Values)
		ps = append(ps, ch.P)
		out = append(out, ch)
	}
	adjusted := stats.HolmAdjusted(ps)
	for i, sig := range stats.Holm(ps, RepeatAlpha) {
		out[i].PHolm, out[i].Significant = adjusted[i], sig
	}
	return out
}

// ErrNotRepeated is a JSON document without repeated runs' statistics.
var ErrNotRepeated = errors.New(`no "repeated" object: not the --json output of a run with --repeat`)

// ReadRepeated reads the per-run values of each headline quantity from the
// JSON WriteRepeatedJSON wrote, and derives their statistics again (the
// file's own mean and interval are not trusted).
func ReadRepeated(r io.Reader) ([]RepeatedQuantity, error) {
	var doc struct {
		Repeated *struct {
			Headline []struct {
				Name   string    `json:"name"`
				Label  string    `json:"label"`
				Unit   string    `json:"unit"`
				Values []float64 `json:"values"`
			} `json:"headline"`
		} `json:"repeated"`
	}
	if err := json.NewDecoder(r).Decode(&doc); err != nil {
		return nil, fmt.Errorf("read the repeated runs' JSON: %w", err)
	}
	if doc.Repeated == nil {
		return nil, ErrNotRepeated
	}
	out := make([]RepeatedQuantity, 0, len(doc.Repeated.Headline))
	seen := map[string]bool{}
	for _, h := range doc.Repeated.Headline {
		switch {
		case h.Name == "":
			return nil, errors.New("a headline quantity without a name")
		case seen[h.Name]:
			return nil, fmt.Errorf("headline quantity %q appears twice", h.Name)
		}
		seen[h.Name] = true
		if h.Label == "" {
			h.Label = h.Name
		}
		out = append(out, NewRepeatedQuantity(h.Name, h.Label, h.Unit, h.Values))
	}
	return out, nil
}

// WriteRepeatedComparison prints each quantity's means, change and verdict,
// then the rule, and a closing line: how many changed, or "no significant
// change" when none did.
func WriteRepeatedComparison(w io.Writer, changes []RepeatedChange) error {
	ew := &errWriter{w: w}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "quantity\tbase mean (runs)\tother mean (runs)\tchange\tverdict")
	significant := 0
	for _, c := range changes {
		change := "-"
		if !math.IsNaN(c.Delta) {
			change = formatQuantity(c.Delta, c.Unit)
			if c.Delta > 0 {
				change = "+" + change
			}
			if !math.IsNaN(c.DeltaPct) {
				change += fmt.Sprintf(" (%+.1f%%)", c.DeltaPct)
			}
		}
		if c.Significant {
			significant++
		}
		fmt.Fprintf(tw, "%s\t%s (%d)\t%s (%d)\t%s\t%s\n", c.Label,
			formatQuantity(c.Base.Mean, c.Unit), c.Base.N, formatQuantity(c.Other.Mean, c.Unit), c.Other.N, change, c.Verdict())
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the comparison: %w", err)
	}
	ew.printf("\nTest: %s.\n", RepeatRule)
	if significant == 0 {
		ew.printf("Result: no significant change.\n")
	} else {
		ew.printf("Result: %d of %d quantities changed significantly.\n", significant, len(changes))
	}
	return ew.err
}
