package report

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
)

// legacyKey is a stage key of the old "st:NAME" form (not "burst:").
var legacyKey = regexp.MustCompile(`(^|[^a-z])st:[a-z_]+`)

// A recording whose server reported stages of its own names, keyed as
// recordings made before had them ("st:loop_wait"), reports them in every
// format as "server: loop_wait", never "st:", and with no "other" row or
// band (every stage kept its name).
func TestReportsNameServerStages(t *testing.T) {
	t.Parallel()
	s := defaultSynth(7)
	s.legacyServerStages = true
	path := s.record(t, t.TempDir())
	rec, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	outputs := map[string]string{}
	for _, f := range []Format{Markdown, JSON, CSV, HTML} {
		var b bytes.Buffer
		if err := Write(&b, f, rec); err != nil {
			t.Fatal(err)
		}
		outputs[string(f)] = b.String()
	}
	for _, f := range []RowFormat{RowsCSV, RowsJSONL} {
		var b bytes.Buffer
		if err := WriteRequests(context.Background(), &b, f, path, path); err != nil {
			t.Fatal(err)
		}
		outputs["requests "+string(f)] = b.String()
	}
	for name, out := range outputs {
		for _, want := range []string{"server: loop_wait", "server: other"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: no %q", name, want)
			}
		}
		if m := legacyKey.FindString(out); m != "" {
			t.Errorf("%s: says %q", name, m)
		}
	}
	if b := rec.Bands[0].Stages; b["other"] != 0 {
		t.Errorf("an other band of %v ms where every stage kept its name", b["other"])
	}
	if _, ok := rec.Summary.Breakdown.Stages["other"]; ok {
		t.Errorf("an other row where every stage kept its name")
	}
}
