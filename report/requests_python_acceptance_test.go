//go:build acceptance

package report

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The Python one-liner of docs/export.md, run by a real Python on the JSON
// lines export, gives the summary's TTFT p50 and p99.
func TestRequestRowsPythonOneLinerGivesTheSummary(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the docs' one-liner cannot be checked here")
	}
	s := defaultSynth(9)
	path := s.record(t, t.TempDir())
	rec, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	rows := filepath.Join(t.TempDir(), "requests.jsonl")
	var buf bytes.Buffer
	if err := WriteRequests(context.Background(), &buf, RowsJSONL, path, path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rows, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	// As docs/export.md writes it.
	script := `import json,sys; v=sorted(r['ttft_ms'] for r in map(json.loads,open(sys.argv[1])) if r['outcome']=='ok' and not r['warmup'] and r['ttft_ms']>0); q=lambda p: v[max(int(p*len(v)+0.5),1)-1]; print(q(.5), q(.99))`
	out, err := exec.Command(python, "-c", script, rows).CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	var p50, p99 float64
	if _, err := fmt.Sscan(string(out), &p50, &p99); err != nil {
		t.Fatalf("python printed %q: %v", out, err)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"p50", p50, rec.Summary.TTFT.P50}, {"p99", p99, rec.Summary.TTFT.P99}} {
		if math.Abs(c.got-c.want) > c.want*0.001+0.001 {
			t.Errorf("TTFT %s: Python %v, the summary %v", c.name, c.got, c.want)
		}
	}
}
