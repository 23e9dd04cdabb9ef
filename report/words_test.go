package report

import (
	"bytes"
	"html"
	"regexp"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

func TestCounted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0 requests"}, {1, "1 request"}, {2, "2 requests"}, {-1, "-1 requests"}} {
		if got := counted(tc.n, "request", "requests"); got != tc.want {
			t.Errorf("counted(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// pluralAfterOne is a count of one with a plural noun, as the reports'
// sentences and titles would write it.
var pluralAfterOne = regexp.MustCompile(`(^|[^0-9.,])1 (requests|streams|samples|whole windows|windows|values|stage values|bytes|events|tokens|reasoning tokens|answer tokens|markers|errors|steps)\b`)

// TestReportsSayOneInTheSingular: a closed-loop run of one stream and one
// request, with one server sample, in every format: no "1 requests".
func TestReportsSayOneInTheSingular(t *testing.T) {
	t.Parallel()
	s := synth{seed: 1, duration: 100 * time.Millisecond, interval: 100 * time.Millisecond, queueMean: 60 * time.Millisecond,
		header: func(h *event.Session) {
			h.Load = event.Load{Mode: "closed", Concurrency: 1, Requests: 1, PromptTokens: "512", OutputTokens: "32"}
		}}
	rec := s.load(t)
	if rec.Summary.Requests.Sent != 1 || rec.Summary.Server.Samples != 1 {
		t.Fatalf("%d requests, %d server samples: want one of each", rec.Summary.Requests.Sent, rec.Summary.Server.Samples)
	}
	for _, f := range Formats {
		var buf bytes.Buffer
		if err := Write(&buf, f, rec); err != nil {
			t.Fatal(err)
		}
		out := html.UnescapeString(buf.String())
		for _, m := range pluralAfterOne.FindAllString(out, -1) {
			t.Errorf("%s report says %q", f, m)
		}
		for _, want := range []string{"1 request", "1 stream"} {
			if f != JSON && f != CSV && !bytes.Contains([]byte(out), []byte(want)) {
				t.Errorf("%s report lacks %q", f, want)
			}
		}
	}
}
