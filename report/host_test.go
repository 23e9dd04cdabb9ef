package report

import (
	"bytes"
	"strings"
	"testing"
)

// TestReportsShowTheClientHost: a recording with the host collector's
// samples shows the client host's figures in every report format.
func TestReportsShowTheClientHost(t *testing.T) {
	t.Parallel()
	s := defaultSynth(3)
	s.hostPSI = 0.38
	rec := s.load(t)
	for _, f := range []Format{Markdown, HTML, JSON, CSV} {
		var buf bytes.Buffer
		if err := Write(&buf, f, rec); err != nil {
			t.Fatal(err)
		}
		want := "host: PSI cpu 38% · steal 0% · run queue 9/2 · latscope 7% of a core"
		switch f {
		case JSON:
			want = `"busy_psi_cpu_some_mean": 0.38`
		case CSV:
			want = "host,psi_cpu_some,mean,0.38"
		}
		if out := buf.String(); !strings.Contains(out, want) {
			t.Errorf("%s report lacks %q", f, want)
		}
	}
	// Without host samples, no host section.
	var buf bytes.Buffer
	if err := Write(&buf, Markdown, defaultSynth(3).load(t)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "Client host") {
		t.Error("a host section without host samples")
	}
}
