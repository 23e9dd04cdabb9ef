//go:build acceptance

package report

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/latscope/latscope/sweep"
)

// TestSweepCurveRendersInChromium renders a sweep's report in headless
// Chromium, with networking off: the DOM Chromium built holds the curve,
// its steps and the knee and max-load marks at their steps, and the
// screenshot of the curve decodes and is not blank.
func TestSweepCurveRendersInChromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not on PATH; install it (Debian: apt-get install -y chromium) to render the HTML report")
	}
	res := sweep.NewResult(curveSteps(), nil)
	rec := defaultSynth(1).load(t)
	rec.Sweep = &res
	dir := t.TempDir()
	page := filepath.Join(dir, "sweep.html")
	if err := os.WriteFile(page, []byte(renderHTML(t, rec)), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
			"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir=" + filepath.Join(dir, "profile")}
		cmd := exec.CommandContext(ctx, chromium, append(append(base, args...), "file://"+page)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
		}
		return out
	}

	dom, err := html.Parse(strings.NewReader(string(run("--dump-dom"))))
	if err != nil {
		t.Fatalf("chromium's DOM does not parse: %v", err)
	}
	curve := chartNode(t, dom, "sweep-curve")
	if n := len(groups(curve, "step")); n != 5 {
		t.Errorf("chromium's DOM has %d steps on the curve, want 5", n)
	}
	curves := 0
	walk(curve, func(n *html.Node) {
		if n.Data == "path" && attr(n, "class") == "curve" {
			curves++
		}
	})
	if curves != 3 {
		t.Errorf("chromium's DOM has %d curves, want 3", curves)
	}
	for class, step := range map[string]string{"knee": "3", "max-load": "4"} {
		marks := groups(curve, class)
		if len(marks) != 1 || attr(marks[0], "data-step") != step || titleOf(marks[0]) == "" {
			t.Errorf("chromium's DOM has %d %s marks, want one at step %s with a title", len(marks), class, step)
		}
	}

	shot := filepath.Join(dir, "sweep.png")
	run("--screenshot="+shot, "--window-size=1200,1000")
	img := readScreenshot(t, shot, 1200, 1000)
	b := img.Bounds()
	// The curve sits in the screenshot's lower half: its lines and markers
	// are coloured.
	coloured, total := 0, 0
	for y := b.Min.Y + b.Dy()/2; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			r, g, bl = r>>8, g>>8, bl>>8
			total++
			if max(r, g, bl)-min(r, g, bl) > 60 {
				coloured++
			}
		}
	}
	if coloured < total/500 {
		t.Errorf("only %d of %d sampled pixels of the curve's half have colour: no curve drawn", coloured, total)
	}
}
