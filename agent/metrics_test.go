package agent

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
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
	a := startAgent(t, Config{Listen: ListenConfig{Token: rightToken}, Ring: RingConfig{MaxEvents: 3}, Now: clock.Now,
		Identity: Identity{Name: "rack-7", Region: "eu-west", Shard: "1/3", SLO: "ttft.p99<2s"},
		Good:     func(r *event.Request) bool { return r.OK() }})
	failed := requestEvent(2)
	failed.Request.Outcome, failed.Request.OutputTokens = event.OutcomeTimeout, 7
	warm := requestEvent(3)
	warm.Request.Warmup = true
	publishAll(t, a.Server, sessionEvent("rack-7"), requestEvent(1), failed, warm,
		event.NewProbe(&event.ProbeSample{Time: t0, InFlight: 12, CPUPercent: 3, Limited: true, SchedLagP99: 250 * time.Millisecond}))
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
	// The agent's --record could not write 5 events: its pipeline says so.
	publishAll(t, a.Server, event.NewLoss(&event.Loss{Time: t0, Consumer: event.ConsumerRecorder, Events: 5, Reason: "no space left on device"}))
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
	checkDocumentedFamilies(t, families)

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
		{MetricProbeLimited, nil, gaugeValue, 1},
		{MetricSchedLag, nil, gaugeValue, 0.25},
		{MetricEvents, map[string]string{"kind": "request"}, counterValue, 3},
		{MetricEventsInvalid, nil, counterValue, 1},
		{MetricUnauthorized, map[string]string{"path": "/metrics"}, counterValue, 1},
		{MetricConnections, nil, counterValue, 2},
		{MetricGaps, nil, counterValue, 1},
		{MetricEventsDropped, nil, counterValue, 1},
		{MetricRingEvents, nil, gaugeValue, 3},
		{MetricUptime, nil, gaugeValue, 90},
		{MetricEventsLost, map[string]string{"consumer": "recorder"}, counterValue, 5},
		{MetricGoodRequests, nil, counterValue, 1},
		{MetricAgentInfo, map[string]string{"agent_name": "rack-7", "agent_region": "eu-west", "agent_shard": "1/3", "slo": "ttft.p99<2s"}, gaugeValue, 1},
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

// checkDocumentedFamilies checks that /metrics exports exactly the
// documented families (MetricNames), each named latscope_*.
func checkDocumentedFamilies(t *testing.T, families map[string]*dto.MetricFamily) {
	t.Helper()
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
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	clock := newManualClock()
	a := startAgent(t, Config{Listen: ListenConfig{Token: rightToken}, Now: clock.Now})
	publishAll(t, a.Server, sessionEvent("rack-7"), requestEvent(1))
	stuckClient(t, a.addr, rightToken)
	clock.Add(5 * time.Second)
	resp, body := get(t, a, "/healthz", rightToken)
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
	// Without the token, or with a wrong one, it is alive and says no more.
	for _, token := range []string{"", wrongToken} {
		resp, body := get(t, a, "/healthz", token)
		if resp.StatusCode != http.StatusOK || strings.TrimSpace(body) != `{"status":"ok"}` {
			t.Errorf("/healthz with token %q: %s %s, want 200 and only the status", token, resp.Status, body)
		}
	}
	a.End()
	if h := a.Health(); h.Status != "ended" {
		t.Fatalf("after End: %+v", h)
	}
}

// A burst of refused requests is logged in a bounded number of lines that
// count every one of them: the first, then one line every 10 s, and what
// is left when the agent stops.
func TestRefusedRequestsAreLoggedInFewLines(t *testing.T) {
	t.Parallel()
	clock := newManualClock()
	var logged lockedBuffer
	a := startAgent(t, Config{Listen: ListenConfig{Token: rightToken}, Now: clock.Now,
		Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	const burst = 2000
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	defer client.CloseIdleConnections()
	refuse := func(n int) {
		for range n {
			req, _ := http.NewRequest(http.MethodGet, a.url+"/metrics", nil)
			req.Header.Set("Authorization", "Bearer "+wrongToken)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("a wrong token got %s", resp.Status)
			}
		}
	}
	refuse(burst)
	clock.Add(10 * time.Second)
	refuse(1) // says the burst
	refuse(7) // within 10 s of that line: said when the agent stops
	a.stop()

	var lines, counted int
	for _, line := range strings.Split(strings.TrimSpace(logged.String()), "\n") {
		if !strings.Contains(line, "refused") {
			continue
		}
		lines++
		if i := strings.Index(line, "count="); i >= 0 {
			n, err := strconv.Atoi(strings.Fields(line[i+len("count="):])[0])
			if err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			counted += n
		} else {
			counted++ // the first refusal's own line
		}
	}
	if lines != 3 || counted != burst+8 {
		t.Fatalf("%d lines counting %d refusals, want 3 lines counting %d:\n%s", lines, counted, burst+8, logged.String())
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

// A scraper that asks for protobuf gets each latency histogram twice over:
// native buckets (a schema and spans) and the classic ones, so a Prometheus
// with native histograms on keeps fine buckets and one without still sums
// the classic ones across agents.
func TestLatencyHistogramsAreNativeAndClassic(t *testing.T) {
	t.Parallel()
	a := startAgent(t, Config{Listen: ListenConfig{Token: rightToken}})
	publishAll(t, a.Server, sessionEvent("rack-7"), requestEvent(1))
	req, err := http.NewRequest(http.MethodGet, a.url+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+rightToken)
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeProtoDelim)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	families := map[string]*dto.MetricFamily{}
	for {
		var f dto.MetricFamily
		if err := dec.Decode(&f); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decode /metrics as protobuf: %v", err)
		}
		families[f.GetName()] = &f
	}
	for _, name := range []string{MetricTTFT, MetricITL, MetricTPOT, MetricE2E} {
		f := families[name]
		if f == nil || len(f.GetMetric()) != 1 {
			t.Errorf("%s: missing", name)
			continue
		}
		h := f.GetMetric()[0].GetHistogram()
		if h.Schema == nil || len(h.GetPositiveSpan()) == 0 {
			t.Errorf("%s: no native buckets (schema %v, spans %v)", name, h.Schema, h.GetPositiveSpan())
		}
		if len(h.GetBucket()) < 10 {
			t.Errorf("%s: %d classic buckets, want the 1-2.5-5 scale", name, len(h.GetBucket()))
		}
	}
}

// A probe that leaves its judgement to the aggregator (event.ProbeRawV1)
// sends how late its sends were; /metrics says the lag and the limit as
// the aggregator judges them.
func TestMetricsJudgeRawProbeSamples(t *testing.T) {
	t.Parallel()
	m := newMetrics(newRing(RingConfig{}, time.Now), func() time.Duration { return 0 }, Identity{}, nil)
	p := &event.ProbeSample{Time: t0, InFlight: 5, CPUPercent: 10, Cores: 2, Raw: event.ProbeRawV1}
	for i := range 30 {
		p.SendLags = append(p.SendLags, event.SendLag{At: -time.Duration(i) * 10 * time.Millisecond, Lag: 40 * time.Millisecond})
	}
	m.observe(event.NewProbe(p))
	if got := gaugeOf(t, m.probeLimited); got != 1 {
		t.Errorf("probe limited %v, want 1 (its open-loop sends 40 ms late at p99)", got)
	}
	if got := gaugeOf(t, m.schedLag); got != 0.04 {
		t.Errorf("sched lag %v s, want 0.04", got)
	}
	if got := gaugeOf(t, m.inFlight); got != 5 {
		t.Errorf("in flight %v, want 5", got)
	}
}

func gaugeOf(t *testing.T, g interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var d dto.Metric
	if err := g.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetGauge().GetValue()
}
