package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"
)

// TestBenchSoakCases runs each soak case in this process for one tiny
// checkpoint, to check that it runs and reports; the numbers of so short a
// run mean nothing and are not checked.
func TestBenchSoakCases(t *testing.T) {
	for _, name := range SoakCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each case waits out its checkpoints
			var out bytes.Buffer
			if err := RunSoakCase(context.Background(), &out, name, []time.Duration{200 * time.Millisecond, 400 * time.Millisecond}, 1, ""); err != nil {
				t.Fatal(err)
			}
			var points int
			sc := bufio.NewScanner(&out)
			for sc.Scan() {
				var p struct {
					Case string `json:"case"`
					RSS  uint64 `json:"rss_bytes"`
					Heap uint64 `json:"heap_bytes"`
				}
				if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
					t.Fatalf("line %q: %v", sc.Text(), err)
				}
				if p.Case != name || p.RSS == 0 || p.Heap == 0 {
					t.Errorf("checkpoint %+v: want case %s with RSS and heap", p, name)
				}
				points++
			}
			if points != 2 {
				t.Errorf("%d checkpoints reported, want 2:\n%s", points, out.String())
			}
		})
	}
}
