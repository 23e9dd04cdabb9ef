package report

import (
	"fmt"
	"math"
	"strings"
)

// sideBySide puts the two recordings' overviews next to each other.
func sideBySide(c *Comparison) table {
	t := table{Title: "Runs", Columns: []string{"", "base", "other"}, Text: true}
	a, b := overview(c.Base), overview(c.Other)
	values := func(rows [][2]string) map[string]string {
		m := make(map[string]string, len(rows))
		for _, r := range rows {
			m[r[0]] = r[1]
		}
		return m
	}
	va, vb := values(a), values(b)
	seen := make(map[string]bool)
	for _, rows := range [][][2]string{a, b} {
		for _, r := range rows {
			if !seen[r[0]] {
				seen[r[0]] = true
				t.Rows = append(t.Rows, []string{r[0], orDash(va[r[0]]), orDash(vb[r[0]])})
			}
		}
	}
	sim := func(r *Recording) string {
		if r.Simulated() {
			return "SIMULATED"
		}
		return "no"
	}
	t.Rows = append(t.Rows, []string{"Simulated", sim(c.Base), sim(c.Other)})
	return t
}

// changesTable lists every change; significant tells whether to keep only
// the significant ones.
func changesTable(c *Comparison, significantOnly bool) table {
	t := table{
		Title:   "Changes (other − base)",
		Columns: []string{"section", "metric", "stat", "unit", "base", "other", "change", "change %", "p", "significant", "windows"},
	}
	if significantOnly {
		t.Title = "Significant changes"
	}
	for _, ch := range c.Changes {
		if significantOnly && !ch.Significant {
			continue
		}
		t.Rows = append(t.Rows, []string{
			ch.Section, ch.Name, ch.Stat, ch.Unit, num(ch.Base, 2), num(ch.Other, 2), signed(ch.Delta, 2, ""),
			signed(ch.DeltaPct, 1, "%"), pValue(ch.P), verdict(ch), fmt.Sprintf("%d / %d", ch.Windows[0], ch.Windows[1]),
		})
		t.Strong = append(t.Strong, ch.Significant)
	}
	if significantOnly && len(t.Rows) == 0 {
		t.Notes = []string{"None: every difference is within the noise between windows."}
	}
	return t
}

// ruleNotes explain the comparison's test under its tables.
func ruleNotes(c *Comparison) []string {
	return []string{
		"Rule: " + Rule + ".",
		fmt.Sprintf("Windows: %s long; %s in base, %d in other. A row with a value in fewer than 2 windows of either run is not tested (n/a), nor is one constant in every window of both runs (an estimate made once per run, such as a handshake's round trip), which has no noise to judge its change by.",
			c.Window, counted(c.Windows[0], "whole window", "whole windows"), c.Windows[1]),
		"Values are whole-run figures; the test judges a difference by how much the statistic varies from window to window within each run.",
	}
}

// headline is one line per significant change, for the top of a report.
func headline(ch Change) string {
	p := pValue(ch.P)
	if !strings.HasPrefix(p, "<") {
		p = "= " + p
	}
	return fmt.Sprintf("%s %s %s: %s → %s %s (%s, p %s)", ch.Section, ch.Name, ch.Stat,
		num(ch.Base, 2), num(ch.Other, 2), ch.Unit, changeWords(ch), p)
}

func changeWords(ch Change) string {
	if math.IsNaN(ch.DeltaPct) {
		return signed(ch.Delta, 2, " "+ch.Unit)
	}
	return signed(ch.DeltaPct, 1, "%")
}
