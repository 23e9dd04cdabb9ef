package collector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape is one parsed metrics page: every family by name, with the series'
// values already checked (no NaN or infinite value survives parsing).
type Scrape struct {
	Time     time.Time // when the page was read; rates divide by the difference of two
	Source   string    // the metrics URL
	Families map[string]*PromFamily
}

// PromFamily is one metric family of a scrape.
type PromFamily struct {
	Name   string
	Type   dto.MetricType
	Series []PromSeries
}

// PromSeries is one label set of a family. Counters, gauges and untyped series
// carry Value; histograms and summaries carry Hist instead.
type PromSeries struct {
	Labels map[string]string
	// Key identifies the label set within its family (labels sorted), so a
	// series can be matched with itself in the previous scrape.
	Key   string
	Value float64
	Hist  *PromHist
}

// PromHist is a cumulative histogram (or a summary, then without buckets) as
// exposed: counts since the server started.
type PromHist struct {
	Count   float64
	Sum     float64
	Buckets []PromBucket // sorted by Upper; the last is usually +Inf
}

// PromBucket is one cumulative histogram bucket.
type PromBucket struct {
	Upper      float64 // the "le" bound, in the metric's own unit
	Cumulative float64 // observations <= Upper
}

// ErrNoMetrics is returned for a page that parses but holds no sample at all.
var ErrNoMetrics = errors.New("no metrics in response")

// ParseProm reads one page in the Prometheus text format (0.0.4). It drops the
// "_created" families that Python servers add, and series whose value is NaN
// or infinite. Malformed or truncated text (the format requires a newline
// after the last sample) is an error, as is a page with no samples. Time and
// Source are left for the caller to set.
func ParseProm(r io.Reader) (*Scrape, error) {
	return parseProm(context.Background(), r)
}

// parseProm is ParseProm that gives up once ctx ends. The text parser
// itself cannot be stopped, so the Prom scraper hands it a reader that
// fails when ctx ends (pageReader).
func parseProm(ctx context.Context, r io.Reader) (*Scrape, error) {
	// A zero-value TextParser panics on the first name; UTF8Validation also
	// accepts the "vllm:"-style names.
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	s := &Scrape{Families: make(map[string]*PromFamily, len(mfs))}
	for name, mf := range mfs {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("parse metrics: %w", err)
		}
		if strings.HasSuffix(name, "_created") {
			continue
		}
		if f := familyFromDTO(name, mf); len(f.Series) > 0 {
			s.Families[name] = f
		}
	}
	if len(s.Families) == 0 {
		return nil, ErrNoMetrics
	}
	return s, nil
}

func familyFromDTO(name string, mf *dto.MetricFamily) *PromFamily {
	f := &PromFamily{Name: name, Type: mf.GetType()}
	for _, m := range mf.GetMetric() {
		s, ok := seriesFromDTO(f.Type, m)
		if ok {
			f.Series = append(f.Series, s)
		}
	}
	return f
}

// seriesFromDTO turns one parsed sample set into a PromSeries, or reports false
// when its values cannot be used (NaN, infinite, missing).
func seriesFromDTO(t dto.MetricType, m *dto.Metric) (PromSeries, bool) {
	s := PromSeries{Labels: make(map[string]string, len(m.GetLabel()))}
	for _, lp := range m.GetLabel() {
		s.Labels[lp.GetName()] = lp.GetValue()
	}
	s.Key = seriesLabelKey(s.Labels)
	switch {
	case m.Histogram != nil:
		h, ok := histFromDTO(m.GetHistogram())
		s.Hist = h
		return s, ok
	case m.Summary != nil:
		sm := m.GetSummary()
		s.Hist = &PromHist{Count: float64(sm.GetSampleCount()), Sum: sm.GetSampleSum()}
		return s, isFiniteFloat(s.Hist.Count) && isFiniteFloat(s.Hist.Sum)
	case m.Counter != nil:
		s.Value = m.GetCounter().GetValue()
	case m.Gauge != nil:
		s.Value = m.GetGauge().GetValue()
	case m.Untyped != nil:
		s.Value = m.GetUntyped().GetValue()
	default:
		return s, false
	}
	return s, isFiniteFloat(s.Value)
}

// histFromDTO copies a classic histogram. Counts may arrive as integers
// or floats (the parser switches a whole histogram to floats if one count has
// a fraction).
func histFromDTO(dh *dto.Histogram) (*PromHist, bool) {
	h := &PromHist{Sum: dh.GetSampleSum(), Count: float64(dh.GetSampleCount())}
	if dh.SampleCountFloat != nil {
		h.Count = dh.GetSampleCountFloat()
	}
	if !isFiniteFloat(h.Count) || !isFiniteFloat(h.Sum) {
		return h, false
	}
	for _, b := range dh.GetBucket() {
		c := float64(b.GetCumulativeCount())
		if b.CumulativeCountFloat != nil {
			c = b.GetCumulativeCountFloat()
		}
		up := b.GetUpperBound()
		if math.IsNaN(up) || !isFiniteFloat(c) {
			return h, false
		}
		h.Buckets = append(h.Buckets, PromBucket{Upper: up, Cumulative: c})
	}
	sort.SliceStable(h.Buckets, func(i, j int) bool { return h.Buckets[i].Upper < h.Buckets[j].Upper })
	return h, true
}

// seriesLabelKey renders labels sorted by name, as in name{a="1",b="2"}.
func seriesLabelKey(labels map[string]string) string {
	if len(labels) == 0 {
		return ""
	}
	names := make([]string, 0, len(labels))
	for n := range labels {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", n, labels[n])
	}
	return b.String()
}

// FilterModel returns the part of s that belongs to one model: series whose
// model label equals model, plus series that carry no model label at all
// (process metrics, llama.cpp, TGI). An empty model returns s unchanged.
func FilterModel(s *Scrape, model string) *Scrape {
	if s == nil || model == "" {
		return s
	}
	out := &Scrape{Time: s.Time, Source: s.Source, Families: make(map[string]*PromFamily, len(s.Families))}
	for name, f := range s.Families {
		kept := &PromFamily{Name: f.Name, Type: f.Type}
		for _, sr := range f.Series {
			if belongsToModel(sr.Labels, model) {
				kept.Series = append(kept.Series, sr)
			}
		}
		if len(kept.Series) > 0 {
			out.Families[name] = kept
		}
	}
	return out
}

// belongsToModel looks for the label servers put the model's name in:
// model_name (vLLM, SGLang, LMDeploy, trtllm-serve) or model (Triton).
func belongsToModel(labels map[string]string, model string) bool {
	for _, l := range []string{"model_name", "model"} {
		if v, ok := labels[l]; ok {
			return v == model
		}
	}
	return true
}

func isFiniteFloat(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
