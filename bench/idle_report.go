package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteIdleTable prints the idle bench's clients, case by case, and its
// targets.
func WriteIdleTable(w io.Writer, r IdleResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "bench idle: %d-token streams, %.0f ms to the first token and %.0f ms between tokens; "+
		"every client of a case measured at the same time, its CPU from /proc\n\n", r.OutputTokens, r.FirstTokenMS, r.IntervalMS)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tclient\tseconds\ttokens\tCPU ms\tCPU µs/tok\tCPU ms/s\tRSS MB\tpeak RSS MB\t")
	for _, c := range r.Cases {
		for _, cl := range c.Clients {
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%d\t%.0f\t%.0f\t%.2f\t%.1f\t%.1f\t\n", c.Name, cl.Name, c.Seconds, cl.Tokens,
				cl.CPUms, cl.CPUPerTokenUS, cl.CPUPerSecMS, cl.RSSMB, cl.PeakRSSMB)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("\n")
	for _, c := range r.Cases {
		for _, ch := range c.Checks {
			mark := "ok"
			if !ch.Met {
				mark = "MISSED"
			}
			fmt.Fprintf(&b, "  %s: %s %s (target %s) %s\n", c.Name, ch.Name, ch.Value, ch.Target, mark)
		}
	}
	if r.Met {
		b.WriteString("all targets met\n")
	} else {
		b.WriteString("some targets MISSED (see above)\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
