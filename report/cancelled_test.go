package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/latscope/latscope/aggregate"
)

// TestCancelledInEveryFormat: the requests the run's end cancelled (a
// signal, --duration and --drain over) are one count, apart from the
// errors, in every format of the report.
func TestCancelledInEveryFormat(t *testing.T) {
	t.Parallel()
	rec := &Recording{Path: "run.lsr", Summary: aggregate.Summary{
		Requests: aggregate.Requests{Sent: 8, OK: 4, CancelledAtEnd: 4},
	}}
	wants := map[Format][]string{
		Markdown: {"| sent | ok | errors | error rate | cancelled at the end |", "| 8 | 4 | 0 | 0.00% | 4 |", "No request failed."},
		CSV:      {"requests,cancelled_at_end,value,4,requests", "requests,errors,value,0,requests"},
		JSON:     {`"cancelled_at_end": 4`, `"errors": 0`},
		HTML:     {"cancelled at the end", "No request failed."},
	}
	for _, f := range Formats {
		var buf bytes.Buffer
		if err := Write(&buf, f, rec); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, want := range wants[f] {
			if !strings.Contains(buf.String(), want) {
				t.Errorf("%s lacks %q", f, want)
			}
		}
	}
}
