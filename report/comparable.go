package report

import (
	"fmt"
	"strings"

	"github.com/latscope/latscope/event"
)

// A Mismatch is one way two runs differ that makes their comparison
// doubtful: a change between them may come from it, not from the server.
type Mismatch struct {
	Field string `json:"field"` // target, model, dialect, server, load, prompt tokens, output tokens, latscope version, simulated
	Base  string `json:"base"`
	Other string `json:"other"`
}

func (m Mismatch) String() string { return fmt.Sprintf("%s %s vs %s", m.Field, m.Base, m.Other) }

// mismatches lists what differs between two runs' session headers beyond
// what a comparison is for: the same workload against the same kind of
// target, measured by the same latscope. The time, seed, length and name
// of a run may differ.
func mismatches(a, b *event.Session) []Mismatch {
	if a == nil || b == nil {
		if a == b {
			return nil
		}
		return []Mismatch{{Field: "session header", Base: present(a != nil), Other: present(b != nil)}}
	}
	var out []Mismatch
	add := func(field, x, y string) {
		if x != y {
			out = append(out, Mismatch{Field: field, Base: orNone(x), Other: orNone(y)})
		}
	}
	add("target", a.Target, b.Target)
	add("model", a.Model, b.Model)
	add("dialect", a.Dialect, b.Dialect)
	add("server", a.Server, b.Server)
	add("load", loadModel(a.Load), loadModel(b.Load))
	add("prompt tokens", a.Load.PromptTokens, b.Load.PromptTokens)
	add("output tokens", a.Load.OutputTokens, b.Load.OutputTokens)
	add("latscope version", a.Latscope, b.Latscope)
	add("simulated", fmt.Sprint(a.Simulated), fmt.Sprint(b.Simulated))
	return out
}

// loadModel is how a run sent its requests, without its length.
func loadModel(l event.Load) string {
	var parts []string
	switch l.Mode {
	case "open":
		parts = append(parts, fmt.Sprintf("open %g req/s", l.Rate))
		if l.Arrival != "" {
			parts = append(parts, l.Arrival)
		}
		if l.Burstiness != 0 {
			parts = append(parts, fmt.Sprintf("burstiness %g", l.Burstiness))
		}
	case "closed":
		parts = append(parts, fmt.Sprintf("closed c=%d", l.Concurrency))
	default:
		parts = append(parts, l.Mode)
	}
	if l.Steps != "" {
		parts = append(parts, l.Steps)
	}
	return strings.Join(parts, " ")
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func present(ok bool) string {
	if ok {
		return "present"
	}
	return "missing"
}

// MismatchWarning is the line every format puts first when the runs
// differ in what they measured; "" when they do not.
func (c *Comparison) MismatchWarning() string {
	if len(c.Mismatches) == 0 {
		return ""
	}
	parts := make([]string, len(c.Mismatches))
	for i, m := range c.Mismatches {
		parts[i] = m.String()
	}
	return "these runs may not compare, a change may come from how they differ rather than from the server: " + strings.Join(parts, "; ")
}
