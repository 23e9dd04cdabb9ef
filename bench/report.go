package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteJSON writes v (an AccuracyResult or a ThroughputResult) as indented
// JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}

// WriteAccuracyTable writes the accuracy results as a human table.
func WriteAccuracyTable(w io.Writer, r AccuracyResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "bench accuracy: simulator profile %s, prompt %d tokens, output %d tokens\n",
		r.Profile, r.PromptTokens, r.OutputTokens)
	b.WriteString("|error| against the simulator's flush time of each frame, in µs\n\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "conc\tclient\treqs\tfailed\tmismatch\tTTFT mean\tTTFT p99\tITL mean\tITL p99\tITL max\t")
	for _, lv := range r.Levels {
		for _, c := range lv.Clients {
			fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", lv.Concurrency, c.Client,
				c.Requests, c.Failed, c.Mismatched, c.TTFT.MeanUs, c.TTFT.P99Us, c.ITL.MeanUs, c.ITL.P99Us, c.ITL.MaxUs)
		}
		if lv.Ratio != nil {
			fmt.Fprintf(tw, "%d\tprobe/bare\t\t\t\t%s\t%s\t%s\t%s\t\t\n", lv.Concurrency,
				lv.Ratio.TTFTMean, lv.Ratio.TTFTP99, lv.Ratio.ITLMean, lv.Ratio.ITLP99)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, lv := range r.Levels {
		for _, c := range lv.Clients {
			if c.FirstError != "" {
				fmt.Fprintf(&b, "conc %d %s: first error: %s\n", lv.Concurrency, c.Client, c.FirstError)
			}
		}
	}
	b.WriteString("\n" + r.Target.Text + "\n")
	if r.Target.Met {
		b.WriteString("  met\n")
	} else {
		fmt.Fprintf(&b, "  MISSED: %s\n", strings.Join(r.Target.Missed, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteThroughputTable writes the throughput results as a human table.
func WriteThroughputTable(w io.Writer, r ThroughputResult) error {
	var b strings.Builder
	phase := fmt.Sprintf("%.2gs", r.PhaseSeconds)
	if r.PhaseTokens > 0 {
		phase = fmt.Sprintf("%d tokens", r.PhaseTokens)
	}
	fmt.Fprintf(&b, "bench throughput: %d-token streams, %d round(s) of %s per client per case; server in a child process\n\n",
		r.OutputTokens, r.Rounds, phase)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "conc\ttok/write\tclient\trequests\tfailed\tevents\tevents/s\tCPU µs/tok\talloc B/tok\tmallocs/tok\t")
	for _, c := range r.Cases {
		for _, cl := range c.Clients {
			fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%d\t%d\t%.0f\t%.3f\t%.1f\t%.3f\t\n", c.Concurrency, c.TokensPerWrite, cl.Client,
				cl.Requests, cl.Failed, cl.Events, cl.EventsPerSec, cl.CPUUsPerToken, cl.AllocBytesPerToken, cl.MallocsPerToken)
		}
		if c.Ratio != nil {
			fmt.Fprintf(tw, "%d\t%d\tprobe/bare\t\t\t\t%s\t%s\t%s\t\t\n", c.Concurrency, c.TokensPerWrite,
				c.Ratio.EventsPerSec, c.Ratio.CPUPerToken, c.Ratio.AllocPerToken)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range r.Cases {
		for _, cl := range c.Clients {
			if cl.FirstError != "" {
				fmt.Fprintf(&b, "conc %d, %d/write, %s: first error: %s\n", c.Concurrency, c.TokensPerWrite, cl.Client, cl.FirstError)
			}
		}
	}
	b.WriteString("\n")
	for _, t := range r.Targets {
		b.WriteString(t + "\n")
	}
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, c := range r.Cases {
		fmt.Fprintf(tw, "  conc %d, %d/write", c.Concurrency, c.TokensPerWrite)
		if len(c.Checks) == 0 {
			fmt.Fprint(tw, "\tMISSED: no probe/bare pair measured")
		}
		for _, ch := range c.Checks {
			mark := "ok"
			if !ch.Met {
				mark = "MISSED"
			}
			fmt.Fprintf(tw, "\t%s %s (%s) %s", ch.Name, ch.Value, ch.Target, mark)
		}
		fmt.Fprintln(tw, "\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Met {
		b.WriteString("all targets met\n")
	} else {
		b.WriteString("some targets MISSED (see above)\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
