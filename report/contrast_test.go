package report

// Text in the HTML report meets WCAG AA's contrast (4.5:1) wherever it is
// drawn: the stylesheet's text colours on its backgrounds, and the bar
// segments' labels on their stage colour and on its hatching.

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/latscope/latscope/event"
)

// minTextContrast is WCAG 2's AA level for normal-size text.
const minTextContrast = 4.5

// cssRule is one rule of the report's stylesheet.
type cssRule struct {
	selector string
	decls    map[string]string
}

// stylesheet parses the page template's <style>: flat rules, no nesting,
// no comments (a change that adds them fails here, not silently).
func stylesheet(t *testing.T) []cssRule {
	t.Helper()
	from, to := strings.Index(pageSource, "<style>"), strings.Index(pageSource, "</style>")
	if from < 0 || to < from {
		t.Fatal("no <style> in the page template")
	}
	css := pageSource[from+len("<style>") : to]
	if strings.Contains(css, "/*") || strings.Contains(css, "@") {
		t.Fatal("the stylesheet has comments or at-rules this parser does not read")
	}
	var rules []cssRule
	for _, block := range strings.Split(css, "}") {
		sel, body, ok := strings.Cut(block, "{")
		if !ok {
			if strings.TrimSpace(block) != "" {
				t.Fatalf("unparsed CSS %q", block)
			}
			continue
		}
		r := cssRule{selector: strings.TrimSpace(sel), decls: map[string]string{}}
		for _, d := range strings.Split(body, ";") {
			k, v, ok := strings.Cut(d, ":")
			if ok {
				r.decls[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
		rules = append(rules, r)
	}
	return rules
}

// TestStylesheetTextContrast: every text colour the stylesheet sets
// (color, and fill, which it sets only for SVG text) against every
// background it sets, the page's own included: text of any rule may sit
// in a box of any other (a note in a warning, a table in the banner).
func TestStylesheetTextContrast(t *testing.T) {
	t.Parallel()
	type use struct{ selector, colour string }
	var texts, backgrounds []use
	for _, r := range stylesheet(t) {
		for _, prop := range []string{"color", "fill"} {
			if c, ok := r.decls[prop]; ok {
				texts = append(texts, use{r.selector + " " + prop, c})
			}
		}
		if c, ok := r.decls["background"]; ok {
			backgrounds = append(backgrounds, use{r.selector, c})
		}
	}
	if len(texts) < 4 || len(backgrounds) < 4 {
		t.Fatalf("found %d text colours and %d backgrounds: the parser missed the stylesheet", len(texts), len(backgrounds))
	}
	for _, fg := range texts {
		for _, bg := range backgrounds {
			if _, _, _, ok := parseHex(fg.colour); !ok {
				t.Errorf("%s: %q is not a #rgb colour this test can judge", fg.selector, fg.colour)
				continue
			}
			if _, _, _, ok := parseHex(bg.colour); !ok {
				t.Errorf("%s: background %q is not a #rgb colour this test can judge", bg.selector, bg.colour)
				continue
			}
			if r := contrastRatio(fg.colour, bg.colour); r < minTextContrast {
				t.Errorf("%s %s on %s background %s: contrast %.2f, want at least %.1f", fg.selector, fg.colour, bg.selector, bg.colour, r, minTextContrast)
			}
		}
	}
}

// hatchPattern is one stripe pattern of the page template: a colour laid
// over the segment's fill at an opacity.
type hatchPattern struct {
	colour  string
	opacity float64
}

var patternRE = regexp.MustCompile(`<pattern id="[^"]*-(hatch-[a-z]+)"[^>]*><rect [^>]*fill="(#[0-9a-fA-F]+)" fill-opacity="([0-9.]+)"/></pattern>`)

// hatchPatterns reads the stripe patterns from src (the template or a page),
// by their name's tail (hatch-dark, hatch-light).
func hatchPatterns(t *testing.T, src string) map[string]hatchPattern {
	t.Helper()
	out := map[string]hatchPattern{}
	for _, m := range patternRE.FindAllStringSubmatch(src, -1) {
		op, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatal(err)
		}
		out[m[1]] = hatchPattern{m[2], op}
	}
	if len(out) != 2 {
		t.Fatalf("hatch patterns %v, want hatch-dark and hatch-light", out)
	}
	return out
}

// over is the colour of p's stripes laid over base.
func (p hatchPattern) over(t *testing.T, base string) string {
	t.Helper()
	r1, g1, b1, ok1 := parseHex(base)
	r2, g2, b2, ok2 := parseHex(p.colour)
	if !ok1 || !ok2 {
		t.Fatalf("cannot blend %q and %q", base, p.colour)
	}
	mix := func(a, b uint8) uint8 { return uint8(float64(a)*(1-p.opacity) + float64(b)*p.opacity + 0.5) }
	return fmt.Sprintf("#%02x%02x%02x", mix(r1, r2), mix(g1, g2), mix(b1, b2))
}

// patternOf is the pattern a fill="url(#ID-hatch-x)" names.
func patternOf(t *testing.T, patterns map[string]hatchPattern, url string) hatchPattern {
	t.Helper()
	i := strings.LastIndex(url, "hatch-")
	if i < 0 {
		t.Fatalf("hatch %q names no pattern", url)
	}
	p, ok := patterns[strings.TrimSuffix(url[i:], ")")]
	if !ok {
		t.Fatalf("hatch %q names no pattern of %v", url, patterns)
	}
	return p
}

// TestStageLabelContrast: for every stage colour (and the default for a
// stage without one), the label drawn on a segment has at least 4.5:1
// against the plain fill and against the fill under its hatching's
// stripes, and the stripes still show on the fill.
func TestStageLabelContrast(t *testing.T) {
	t.Parallel()
	patterns := hatchPatterns(t, pageSource)
	var fills []string // event.StageOther's is the default
	for _, m := range event.StageTable() {
		if m.Fill != "" {
			fills = append(fills, m.Fill)
		}
	}
	c := barChart{ID: "x"}
	for _, fill := range fills {
		text := textOn(fill)
		if r := contrastRatio(text, fill); r < minTextContrast {
			t.Errorf("label %s on %s: contrast %.2f, want at least %.1f", text, fill, r, minTextContrast)
		}
		striped := patternOf(t, patterns, c.hatch(fill)).over(t, fill)
		if r := contrastRatio(text, striped); r < minTextContrast {
			t.Errorf("label %s on %s's hatching (%s): contrast %.2f, want at least %.1f", text, fill, striped, r, minTextContrast)
		}
		if r := contrastRatio(fill, striped); r < 1.15 {
			t.Errorf("the hatching of %s (%s) hardly shows: contrast %.2f", fill, striped, r)
		}
	}
}

// TestRenderedLabelContrast reads a rendered report: each label drawn in a
// bar segment against that segment's fill and hatching (the queue is
// estimated, so a wide segment is hatched).
func TestRenderedLabelContrast(t *testing.T) {
	t.Parallel()
	s := defaultSynth(1)
	s.estimatedQueue = true
	page := renderHTML(t, s.load(t))
	patterns := hatchPatterns(t, page)
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	labels, hatched := 0, 0
	walk(doc, func(g *html.Node) {
		if g.Data != "g" {
			return
		}
		var fill, hatch string
		for n := g.FirstChild; n != nil; n = n.NextSibling {
			if n.Type != html.ElementNode {
				continue
			}
			switch {
			case n.Data == "rect" && strings.HasPrefix(attr(n, "fill"), "url("):
				hatch = attr(n, "fill")
			case n.Data == "rect":
				fill = attr(n, "fill")
			case n.Data == "text" && attr(n, "fill") != "":
				labels++
				text := attr(n, "fill")
				if r := contrastRatio(text, fill); r < minTextContrast {
					t.Errorf("label %q (%s) on %s: contrast %.2f", n.FirstChild.Data, text, fill, r)
				}
				if hatch != "" {
					hatched++
					striped := patternOf(t, patterns, hatch).over(t, fill)
					if r := contrastRatio(text, striped); r < minTextContrast {
						t.Errorf("label %q (%s) on the hatching of %s (%s): contrast %.2f", n.FirstChild.Data, text, fill, striped, r)
					}
				}
			}
		}
	})
	if labels == 0 || hatched == 0 {
		t.Fatalf("%d segment labels, %d on hatching: the test saw no bars", labels, hatched)
	}
}

// TestContrastRatio pins the formula to WCAG's known values.
func TestContrastRatio(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want float64
	}{{"#000", "#fff", 21}, {"#ffffff", "#ffffff", 1}, {"#777777", "#ffffff", 4.48}, {"#0072b2", "#fff", 5.19}} {
		if got := contrastRatio(tc.a, tc.b); got < tc.want-0.01 || got > tc.want+0.01 {
			t.Errorf("contrast(%s, %s) = %.3f, want %.2f", tc.a, tc.b, got, tc.want)
		}
	}
	if got := contrastRatio("red", "#fff"); got != 1 {
		t.Errorf("contrast of an unparsed colour = %v, want 1", got)
	}
}
