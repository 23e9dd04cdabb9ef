package report

import (
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestHTMLRendersInChromium renders a report in headless Chromium, with
// networking off, and checks the screenshot shows a page with charts: it
// decodes, it is not blank, and it has colour (the charts' fills).
func TestHTMLRendersInChromium(t *testing.T) {
	t.Parallel()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not on PATH; install it (Debian: apt-get install -y chromium) to render the HTML report")
	}
	if testing.Short() {
		t.Skip("rendering in Chromium takes a few seconds; skipped with -short")
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	if err := os.WriteFile(page, []byte(renderHTML(t, defaultSynth(1).load(t))), 0o600); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "report.png")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--screenshot="+shot, "--window-size=1200,1600",
		"file://"+page)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	img := readScreenshot(t, shot, 1200, 1600)
	b := img.Bounds()
	var inked, coloured, total int
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			r, g, bl = r>>8, g>>8, bl>>8
			total++
			if r < 235 || g < 235 || bl < 235 {
				inked++
			}
			if max(r, g, bl)-min(r, g, bl) > 60 {
				coloured++
			}
		}
	}
	if inked < total/50 {
		t.Errorf("only %d of %d sampled pixels are not white: the page looks blank", inked, total)
	}
	if coloured < total/200 {
		t.Errorf("only %d of %d sampled pixels have colour: no charts drawn", coloured, total)
	}
	t.Logf("%d%% of the screenshot inked, %d%% in colour", 100*inked/total, 100*coloured/total)
}

// readScreenshot decodes Chromium's screenshot at path and checks its size.
func readScreenshot(t *testing.T, path string, width, height int) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot does not decode: %v", err)
	}
	if b := img.Bounds(); b.Dx() != width || b.Dy() != height {
		t.Errorf("screenshot %dx%d, want %dx%d", b.Dx(), b.Dy(), width, height)
	}
	return img
}
