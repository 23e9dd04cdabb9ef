package collector

import (
	"errors"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// Bad input is an error, never a panic.
func TestParsePromRejectsBadText(t *testing.T) {
	t.Parallel()
	full := promFixture(t, "vllm_v1_b.prom")
	cut := strings.Index(full, "vllm:num_requests_waiting{")
	cases := map[string]string{
		"garbage":              "hello world\n",
		"binary":               "\x00\x01\x02\xff\n",
		"html error page":      "<html><body>502 Bad Gateway</body></html>\n",
		"json":                 `{"status":"ok"}` + "\n",
		"truncated mid-line":   full[:cut+30],
		"truncated mid-labels": full[:cut+10],
		"duplicate TYPE":       "# TYPE a gauge\n# TYPE a gauge\na 1\n",
		"TYPE after samples":   "a 1\n# TYPE a gauge\n",
		"duplicate label name": "a{x=\"1\",x=\"2\"} 1\n",
		"unknown type":         "# TYPE a stateset\na 1\n",
		"exemplar":             "# TYPE a counter\na_total 1 # {trace_id=\"abc\"} 0.5\n",
		"no newline at end":    "a 1",
	}
	for name, text := range cases {
		if _, err := ParseProm(strings.NewReader(text)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	for name, text := range map[string]string{"empty": "", "comments only": "# HELP a b\n# EOF\n", "only NaN": "a NaN\n"} {
		if _, err := ParseProm(strings.NewReader(text)); !errors.Is(err, ErrNoMetrics) {
			t.Errorf("%s: err = %v, want ErrNoMetrics", name, err)
		}
	}
}

// A page cut at a line boundary cannot be told from a short page: it parses,
// with what it holds.
func TestParsePromTruncatedAtLineBoundary(t *testing.T) {
	t.Parallel()
	full := promFixture(t, "llamacpp_b.prom")
	cut := strings.Index(full, "# HELP llamacpp:requests_processing")
	s, err := ParseProm(strings.NewReader(full[:cut]))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Families["llamacpp:requests_processing"]; ok {
		t.Error("family after the cut present")
	}
	if _, ok := s.Families["llamacpp:prompt_tokens_total"]; !ok {
		t.Error("family before the cut missing")
	}
}

func TestParsePromTypesAndValues(t *testing.T) {
	t.Parallel()
	const page = `# TYPE c_total counter
c_total{b="2",a="1"} 7
# TYPE g gauge
g 1.5
u 3
# TYPE h histogram
h_bucket{le="+Inf"} 3
h_bucket{le="0.5"} 1
h_sum 2.5
h_count 3
# TYPE s summary
s{quantile="0.5"} 0.2
s_sum 4
s_count 8
# TYPE fh histogram
fh_bucket{le="1"} 0.5
fh_bucket{le="+Inf"} 1.5
fh_sum 1
fh_count 1.5
# TYPE c_created gauge
c_created 1.7e9
`
	s, err := ParseProm(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Families["c_total"]; got == nil || got.Type != dto.MetricType_COUNTER || got.Series[0].Value != 7 || got.Series[0].Key != `a="1",b="2"` {
		t.Errorf("counter = %+v", got)
	}
	if got := s.Families["u"]; got == nil || got.Type != dto.MetricType_UNTYPED || got.Series[0].Value != 3 {
		t.Errorf("untyped = %+v", got)
	}
	h := s.Families["h"].Series[0].Hist
	if h.Count != 3 || h.Sum != 2.5 || len(h.Buckets) != 2 || h.Buckets[0].Upper != 0.5 || h.Buckets[0].Cumulative != 1 {
		t.Errorf("histogram (buckets sorted by bound) = %+v", h)
	}
	if sm := s.Families["s"].Series[0].Hist; sm.Count != 8 || sm.Sum != 4 || sm.Buckets != nil {
		t.Errorf("summary = %+v", sm)
	}
	if fh := s.Families["fh"].Series[0].Hist; fh.Count != 1.5 || fh.Buckets[0].Cumulative != 0.5 {
		t.Errorf("float histogram = %+v", fh)
	}
	if _, ok := s.Families["c_created"]; ok {
		t.Error("_created family kept")
	}
}

func TestFilterModel(t *testing.T) {
	t.Parallel()
	const page = `a{model_name="x"} 1
a{model_name="y"} 2
b{model="x",version="1"} 3
b{model="y",version="1"} 4
c 5
only_y{model_name="y"} 6
`
	s := promParseAt(t, page, promT0)
	got := FilterModel(s, "x")
	if len(got.Families["a"].Series) != 1 || got.Families["a"].Series[0].Value != 1 {
		t.Errorf("a = %+v", got.Families["a"])
	}
	if len(got.Families["b"].Series) != 1 || got.Families["b"].Series[0].Value != 3 {
		t.Errorf("b = %+v", got.Families["b"])
	}
	if got.Families["c"] == nil {
		t.Error("unlabelled series dropped")
	}
	if got.Families["only_y"] != nil {
		t.Error("other model's family kept")
	}
	if !got.Time.Equal(s.Time) || got.Source != s.Source {
		t.Error("time or source lost")
	}
	if FilterModel(s, "") != s {
		t.Error("empty model should return the scrape unchanged")
	}
	if len(s.Families["a"].Series) != 2 {
		t.Error("FilterModel changed its input")
	}
}
