package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/latscope/latscope/event"
)

func renderHTML(t *testing.T, rec *Recording) string {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, HTML, rec); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// walk calls fn for every element of the document.
func walk(n *html.Node, fn func(*html.Node)) {
	if n.Type == html.ElementNode {
		fn(n)
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, fn)
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// checkOffline parses page and fails on anything that could load or run
// something: scripts, external resources, URLs in attributes or styles.
func checkOffline(t *testing.T, page string) *html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatalf("not HTML: %v", err)
	}
	walk(doc, func(n *html.Node) {
		switch n.Data {
		case "script", "link", "img", "iframe", "object", "embed", "image", "use", "foreignObject", "base", "form":
			t.Errorf("a <%s> element in an offline report", n.Data)
		case "style":
			if css := n.FirstChild.Data; strings.Contains(css, "url(") || strings.Contains(css, "@import") || strings.Contains(css, "@font-face") {
				t.Error("the stylesheet loads something")
			}
		}
		for _, a := range n.Attr {
			v := strings.ToLower(a.Val)
			if strings.Contains(v, "http://") || strings.Contains(v, "https://") || strings.HasPrefix(v, "//") ||
				strings.HasPrefix(a.Key, "on") || a.Key == "href" || a.Key == "src" || a.Key == "style" {
				t.Errorf("<%s %s=%q> could load or run something", n.Data, a.Key, a.Val)
			}
			if strings.Contains(v, "url(") && !regexp.MustCompile(`^url\(#[a-z0-9-]+\)$`).MatchString(v) {
				t.Errorf("<%s %s=%q> refers outside the page", n.Data, a.Key, a.Val)
			}
		}
	})
	return doc
}

// checkSVGsAreXML parses every inline SVG as strict XML.
func checkSVGsAreXML(t *testing.T, page string) int {
	t.Helper()
	svgs := regexp.MustCompile(`(?s)<svg\b.*?</svg>`).FindAllString(page, -1)
	for i, svg := range svgs {
		d := xml.NewDecoder(strings.NewReader(svg))
		for {
			_, err := d.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("SVG %d is not well-formed: %v\n%s", i, err, svg[:min(len(svg), 400)])
			}
		}
	}
	return len(svgs)
}

func TestHTMLIsOfflineAndHasTheCharts(t *testing.T) {
	t.Parallel()
	page := renderHTML(t, defaultSynth(1).load(t))
	doc := checkOffline(t, page)
	checkSVGsAreXML(t, page)

	charts := map[string]*html.Node{}
	walk(doc, func(n *html.Node) {
		if n.Data == "svg" && attr(n, "aria-labelledby") != "" {
			charts[strings.TrimSuffix(attr(n, "aria-labelledby"), "-title")] = n
		}
	})
	for _, id := range []string{"breakdown", "run-ttft", "run-itl", "run-queue"} {
		if charts[id] == nil {
			t.Errorf("no %s chart", id)
		}
	}
	texts := func(n *html.Node) string {
		var b strings.Builder
		var rec func(*html.Node)
		rec = func(n *html.Node) {
			if n.Type == html.TextNode {
				b.WriteString(n.Data + "\n")
			}
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				rec(c)
			}
		}
		rec(n)
		return b.String()
	}
	bd := charts["breakdown"]
	if bd == nil {
		t.FailNow()
	}
	bdText := texts(bd)
	for _, want := range []string{"mean", "slowest 1%", "585 requests", "queue 61.1 ms", "prefill 80.0 ms", "146.44 ms", "SIMULATED", "estimated stages are hatched"} {
		if !strings.Contains(bdText, want) {
			t.Errorf("breakdown chart lacks %q", want)
		}
	}
	// Estimated stages are hatched in the bars and in the legend.
	if n := strings.Count(page, `fill="url(#breakdown-hatch-`); n < 6 {
		t.Errorf("%d hatched shapes, want the three estimated stages in two bars and the legend", n)
	}
	if !strings.Contains(page, "<td>network_out</td><td>estimated</td>") {
		t.Error("legend does not say network_out is estimated")
	}
	for id, tc := range map[string]struct {
		lines  int
		labels []string
	}{
		"run-ttft":  {2, []string{"p50", "p99", "TTFT (ms)", "seconds since the session started"}},
		"run-itl":   {2, []string{"p50", "p99", "ITL (ms)"}},
		"run-queue": {3, []string{"waiting (server)", "running (server)", "in flight (probe)", "requests"}},
	} {
		c := charts[id]
		if c == nil {
			continue
		}
		text := texts(c)
		for _, l := range append(tc.labels, "SIMULATED") {
			if !strings.Contains(text, l) {
				t.Errorf("%s chart lacks %q", id, l)
			}
		}
		paths := 0
		walk(c, func(n *html.Node) {
			if n.Data == "path" && strings.Count(attr(n, "d"), "L") > 50 {
				paths++
			}
		})
		if paths != tc.lines {
			t.Errorf("%s chart has %d lines of 50 points or more, want %d", id, paths, tc.lines)
		}
	}
	for _, want := range []string{"SIMULATED: run-1.zst measured", "Latency (ms)", "Top error messages", "GPU (latest sample) - SIMULATED", "Insights"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func TestHTMLComparison(t *testing.T) {
	t.Parallel()
	slow := defaultSynth(14)
	slow.queueMean = 90 * time.Millisecond
	var buf bytes.Buffer
	if err := WriteComparison(&buf, HTML, compare(t, defaultSynth(13).load(t), slow.load(t))); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	checkOffline(t, page)
	if n := checkSVGsAreXML(t, page); n < 4 {
		t.Errorf("%d SVGs", n)
	}
	for _, want := range []string{"Significant changes", `<tr class="strong"><td>breakdown</td><td>queue</td><td>mean</td>`,
		"base: slowest 1%", "other: mean", "base p99", "other in flight", "Rule: Welch"} {
		if !strings.Contains(page, want) {
			t.Errorf("comparison page lacks %q", want)
		}
	}
}

// A recording holds no secrets (credentials are removed before it is
// written), but the report must not pass on one that got into a header or
// a message anyway, nor let recorded text turn into markup.
func TestReportsLeakNoSecretAndInjectNoMarkup(t *testing.T) {
	t.Parallel()
	const token = "sk-FAKE-0123456789abcdef"
	s := defaultSynth(9)
	s.duration = 15 * time.Second
	s.header = func(h *event.Session) {
		h.Target = "http://admin:" + token + "@10.0.0.1:8000/v1?api_key=" + token
		h.MetricsURL = "https://u:" + token + "@10.0.0.1:8000/metrics?token=" + token
		h.Model = `<script>alert("` + token[:3] + `")</script>`
		h.Name = `run <img src=x onerror=alert(1)>`
	}
	evs := s.events()
	evs = append(evs,
		event.NewMarker(&event.Marker{Time: t0.Add(5 * time.Second), Kind: event.MarkerNote, Source: "test",
			Message: `</text></svg><script>alert(1)</script> from http://bob:` + token + `@10.0.0.1/`}),
		event.NewRequest(&event.Request{ID: "x", Dialect: "openai-chat", Intended: t0.Add(time.Second), Start: t0.Add(time.Second),
			E2E: time.Millisecond, Outcome: event.OutcomeConnect, Error: `Post "http://carol:` + token + `@10.0.0.1/v1": connection refused`}),
		event.NewServer(&event.ServerSample{Time: t0.Add(14 * time.Second), Source: "http://dave:" + token + "@10.0.0.1:8000/metrics", Dialect: "vllm"}),
	)
	path := writeRecording(t, t.TempDir(), "secret.zst", s.sessionHeader(), evs, 0)
	rec, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range Formats {
		var buf bytes.Buffer
		if err := Write(&buf, f, rec); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		if strings.Contains(out, token) {
			t.Errorf("%s report leaks the token", f)
		}
		if regexp.MustCompile(`(^|[^\\])<(script|img)`).MatchString(out) { // Markdown escapes it as \<script
			t.Errorf("%s report has a raw <script> or <img>", f)
		}
	}
	page := renderHTML(t, rec)
	checkOffline(t, page)
	checkSVGsAreXML(t, page)
	for _, want := range []string{"&lt;script&gt;alert(&#34;sk-&#34;)&lt;/script&gt;", "run &lt;img src=x onerror=alert(1)&gt;", "REDACTED@10.0.0.1"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks the escaped %q", want)
		}
	}
}
