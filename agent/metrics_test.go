package agent

import (
	"bufio"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/latscope/latscope/event"
)

func TestMetricsParseAndExportExactlyTheDocumentedNames(t *testing.T) {
	t.Parallel()
	clock := newManualClock()
	a := startAgent(t, Config{Listen: ListenConfig{Token: rightToken}, Ring: RingConfig{MaxEvents: 3}, Now: clock.Now})
	failed := requestEvent(2)
	failed.Request.Outcome, failed.Request.OutputTokens = event.OutcomeTimeout, 7
	warm := requestEvent(3)
	warm.Request.Warmup = true
	publishAll(t, a.Server, sessionEvent("rack-7"), requestEvent(1), failed, warm,
		event.NewProbe(&event.ProbeSample{Time: t0, InFlight: 12, CPUPercent: 3}))
	if err := a.Publish(event.Event{Kind: event.KindRequest}); err == nil {
		t.Fatal("an event without its payload was published")
	}
	get(t, a, "/metrics", wrongToken) // a 401
	c := attach(t, ClientConfig{URL: a.url, Token: rightToken})
	c.untilState(t, Streaming)
	// A client resuming after id 1 gets a gap record for id 2: the ring
	// holds 3 to 5.
	resp := openEventsAfter(t, a, "1")
	first, err := bufio.NewReader(resp.Body).ReadString('}')
	resp.Body.Close()
	if err != nil || !strings.Contains(first, `"kind":"loss"`) {
		t.Fatalf("resumed after id 1: %q, %v; want a gap record first", first, err)
	}
	a.End()
	if _, err := c.finish(t); err != nil {
		t.Fatal(err)
	}
	clock.Add(90 * time.Second)

	resp, body := get(t, a, "/metrics", rightToken)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	var got []string
	for name := range families {
		got = append(got, name)
	}
	slices.Sort(got)
	var want []string
	for _, name := range MetricNames() {
		if !strings.HasSuffix(name, "_bucket") && !strings.HasSuffix(name, "_sum") && !strings.HasSuffix(name, "_count") {
			want = append(want, name)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("exported families\n %v\nwant the documented\n %v", got, want)
	}
	for _, name := range got {
		if !strings.HasPrefix(name, "latscope_") {
			t.Errorf("%s: not named latscope_*", name)
		}
	}

	checks := []struct {
		family string
		labels map[string]string
		value  func(*dto.Metric) float64
		want   float64
	}{
		{MetricRequests, map[string]string{"outcome": "ok"}, counterValue, 1},
		{MetricRequests, map[string]string{"outcome": "timeout"}, counterValue, 1},
		{MetricOutputTokens, nil, counterValue, 128 + 7},
		{MetricTTFT, nil, histCount, 1},
		{MetricITL, nil, histCount, 127},
		{MetricTPOT, nil, histCount, 1},
		{MetricStage, map[string]string{"stage": "wait_headers"}, histCount, 1},
		{MetricBreakdown, map[string]string{"stage": "queue", "provenance": "server"}, histCount, 1},
		{MetricInFlight, nil, gaugeValue, 12},
		{MetricEvents, map[string]string{"kind": "request"}, counterValue, 3},
		{MetricEventsInvalid, nil, counterValue, 1},
		{MetricUnauthorized, map[string]string{"path": "/metrics"}, counterValue, 1},
		{MetricConnections, nil, counterValue, 2},
		{MetricGaps, nil, counterValue, 1},
		{MetricEventsDropped, nil, counterValue, 1},
		{MetricRingEvents, nil, gaugeValue, 3},
		{MetricUptime, nil, gaugeValue, 90},
	}
	for _, c := range checks {
		m := find(families[c.family], c.labels)
		if m == nil {
			t.Errorf("%s%v: missing", c.family, c.labels)
			continue
		}
		if got := c.value(m); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.family, c.labels, got, c.want)
		}
	}
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	clock := newManualClock()
	a := startAgent(t, Config{Listen: ListenConfig{Token: rightToken}, Now: clock.Now})
	publishAll(t, a.Server, sessionEvent("rack-7"), requestEvent(1))
	stuckClient(t, a.addr, rightToken)
	clock.Add(5 * time.Second)
	resp, body := get(t, a, "/healthz", "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("/healthz: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	var h Health
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		t.Fatal(err)
	}
	if want := (Health{Status: "ok", UptimeSeconds: 5, EventsPublished: 2, Clients: 1, RingEvents: 2}); h != want {
		t.Fatalf("/healthz = %+v, want %+v", h, want)
	}
	a.End()
	if h := a.Health(); h.Status != "ended" {
		t.Fatalf("after End: %+v", h)
	}
}

func openEventsAfter(t *testing.T, a *agentUnderTest, lastID string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, a.url+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+rightToken)
	req.Header.Set("Last-Event-ID", lastID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func find(f *dto.MetricFamily, labels map[string]string) *dto.Metric {
	if f == nil {
		return nil
	}
next:
	for _, m := range f.GetMetric() {
		for k, v := range labels {
			if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == k && l.GetValue() == v }) {
				continue next
			}
		}
		return m
	}
	return nil
}

func counterValue(m *dto.Metric) float64 { return m.GetCounter().GetValue() }
func gaugeValue(m *dto.Metric) float64   { return m.GetGauge().GetValue() }
func histCount(m *dto.Metric) float64    { return float64(m.GetHistogram().GetSampleCount()) }
