package tui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// requestFilter is what `/` keeps in the requests view: every term must
// match. Terms: "ok" or "failed" (not the cancelled: "cancelled" finds
// those); an outcome or a flag (or a part of its name: "nagle", "429");
// "ttft>200" (ms; "ttft>1.5s" too) for a minimum TTFT; "@east" for the
// requests of one agent; "prompt=513-1024" or "output=1025+" for a length
// bucket, as the by-length line names them.
type requestFilter struct {
	text           string
	minTTFT        time.Duration
	agent          string
	ok             *bool
	words          []string
	prompt, output *aggregate.LengthBucket
}

// parseFilter reads a filter as typed; a term it cannot read is an error
// that names it, and the filter is not applied.
func parseFilter(text string) (requestFilter, error) {
	f := requestFilter{text: strings.TrimSpace(text)}
	for _, term := range strings.Fields(strings.ToLower(text)) {
		switch {
		case term == "ok":
			yes := true
			f.ok = &yes
		case term == "failed" || term == "error" || term == "errors" || term == "!ok":
			no := false
			f.ok = &no
		case strings.HasPrefix(term, "@"), strings.HasPrefix(term, "agent="):
			f.agent = strings.TrimPrefix(strings.TrimPrefix(term, "@"), "agent=")
		case strings.HasPrefix(term, "prompt="), strings.HasPrefix(term, "output="):
			side, val, _ := strings.Cut(term, "=")
			b, err := aggregate.ParseLengthRange(val)
			if err != nil {
				return requestFilter{}, fmt.Errorf("%s: %w", side, err)
			}
			if side == "prompt" {
				f.prompt = &b
			} else {
				f.output = &b
			}
		case strings.HasPrefix(term, "ttft>"), strings.HasPrefix(term, ">"):
			v := strings.TrimLeft(strings.TrimPrefix(term, "ttft"), ">=")
			d, err := parseTTFT(v)
			if err != nil {
				return requestFilter{}, fmt.Errorf("%q: %w", term, err)
			}
			f.minTTFT = d
		default:
			f.words = append(f.words, term)
		}
	}
	return f, nil
}

// parseMS reads "200", "200ms" or "1.5s".
func parseTTFT(v string) (time.Duration, error) {
	unit := time.Millisecond
	switch {
	case strings.HasSuffix(v, "ms"):
		v = strings.TrimSuffix(v, "ms")
	case strings.HasSuffix(v, "s"):
		v, unit = strings.TrimSuffix(v, "s"), time.Second
	}
	x, err := strconv.ParseFloat(v, 64)
	if err != nil || x < 0 {
		return 0, fmt.Errorf("want a TTFT such as 200, 200ms or 1.5s")
	}
	return time.Duration(x * float64(unit)), nil
}

// active reports whether the filter keeps fewer than every request.
func (f *requestFilter) active() bool { return f.text != "" }

// keep reports whether r passes; agent names its agent ("" when unknown).
func (f *requestFilter) keep(r *event.Request, agent string) bool {
	if f.ok != nil && (*f.ok && !r.OK() || !*f.ok && !r.Failed()) {
		return false // "failed" keeps the failures, not the cancelled
	}
	if f.minTTFT > 0 && r.TTFT < f.minTTFT {
		return false
	}
	if f.agent != "" && !strings.Contains(strings.ToLower(agent), f.agent) {
		return false
	}
	if f.prompt != nil && !f.prompt.Contains(r.PromptTokens) || f.output != nil && !f.output.Contains(r.OutputTokens) {
		return false
	}
	for _, w := range f.words {
		if !matchesWord(r, w) {
			return false
		}
	}
	return true
}

// matchesWord says whether w is part of r's outcome, status, error or a flag.
func matchesWord(r *event.Request, w string) bool {
	if strings.Contains(string(r.Outcome), w) || strings.Contains(strings.ToLower(r.Error), w) {
		return true
	}
	if r.Status != 0 && strconv.Itoa(r.Status) == w {
		return true
	}
	for _, fl := range r.Flags {
		if strings.Contains(string(fl), w) {
			return true
		}
	}
	return false
}
