package collector

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// TestPromModelLoading: llama-server answers 503 "Loading model" until its
// model is loaded; the scrape says so in its own words, once, and recovers.
func TestPromModelLoading(t *testing.T) {
	t.Parallel()
	page := promFixture(t, "llamacpp_a.prom")
	var loading atomic.Bool
	loading.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if loading.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`))
			return
		}
		_, _ = w.Write([]byte(page))
	}))
	t.Cleanup(srv.Close)
	r := startProm(t, PromConfig{URL: srv.URL + "/metrics", Interval: 20 * time.Millisecond, Timeout: promTestTimeout})
	m := r.next("model loading marker", isMarker("model loading:")).Marker
	want := "model loading: " + srv.URL + "/metrics answers 503 Service Unavailable; server metrics follow once the model is loaded"
	if m.Message != want {
		t.Errorf("marker %q, want %q", m.Message, want)
	}
	r.next("stale sample", isStaleSample)
	r.next("stale sample", isStaleSample)
	loading.Store(false)
	r.next("recovery", isMarker("metrics scrape recovered"))
	n := 0
	for _, e := range r.seen {
		if isMarker("model loading")(e) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d model loading markers, want 1", n)
	}
}

// TestPromServerNotIdle: a server that holds more requests than the probe
// can have in flight as the run begins gets one marker; one that holds only
// the probe's gets none, and later scrapes are not judged (nor any, when
// the first fails).
func TestPromServerNotIdle(t *testing.T) {
	t.Parallel()
	gauges := func(waiting, running int) string {
		return fmt.Sprintf("# TYPE llamacpp:requests_deferred gauge\nllamacpp:requests_deferred %d\n# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing %d\n", waiting, running)
	}
	cases := []struct {
		name  string
		pages []string
		ours  int
		want  string // "" for no marker
	}{
		{name: "a previous run left 247 queued", pages: []string{gauges(251, 4)}, ours: 8,
			want: "server was not idle when the run began: it reports 251 waiting and 4 running, at most 8 of them latscope's"},
		{name: "only ours", pages: []string{gauges(4, 4), gauges(40, 4)}, ours: 8},
		{name: "the first scrape failed: the beginning is not known", pages: []string{"", gauges(251, 4)}, ours: 8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := promServer(t, tc.pages...)
			r := startProm(t, PromConfig{URL: srv.URL, Interval: 20 * time.Millisecond, Timeout: promTestTimeout,
				OwnInFlight: func() int { return tc.ours }})
			r.next("second sample", isSample)
			r.next("third sample", isSample)
			var got []*event.Marker
			for _, e := range r.seen {
				if isMarker("server was not idle")(e) {
					got = append(got, e.Marker)
				}
			}
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("markers %+v, want none", got)
			case tc.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0].Message, tc.want) || got[0].Values["others"] != 247):
				t.Errorf("markers %+v, want one saying %q with 247 others", got, tc.want)
			}
		})
	}
}

func TestOthersInFlight(t *testing.T) {
	t.Parallel()
	f := func(x float64) *float64 { return &x }
	for _, tc := range []struct {
		waiting, running *float64
		ours             int
		want             float64
	}{
		{f(251), f(4), 8, 247},
		{f(4), f(4), 8, 0},
		{nil, f(3), 0, 3},
		{nil, nil, 0, 0},
		{f(0.4), nil, 0, 0}, // averaged gauges: not a whole request
	} {
		if got := othersInFlight(tc.waiting, tc.running, tc.ours); got != tc.want {
			t.Errorf("othersInFlight(%v, %v, %d) = %v, want %v", promShow(tc.waiting), promShow(tc.running), tc.ours, got, tc.want)
		}
	}
}

// TestPromEventsInTimeOrder: with a clock that steps back (as a wall clock
// may), the scraper's samples and markers still come out in time order.
func TestPromEventsInTimeOrder(t *testing.T) {
	t.Parallel()
	page := promFixture(t, "vllm_v1_a.prom")
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%3 == 0 {
			http.Error(w, "flaky", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte(page))
	}))
	t.Cleanup(srv.Close)
	p, err := NewProm(PromConfig{URL: srv.URL, Interval: 5 * time.Millisecond, Timeout: promTestTimeout})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reads int
	base := time.Unix(1767000000, 0)
	p.now = func() time.Time { // forward 10 s, back 7 s, ...
		mu.Lock()
		defer mu.Unlock()
		reads++
		return base.Add(time.Duration(reads/2*3+reads%2*10) * time.Second)
	}
	ctx, cancel := context.WithCancel(context.Background())
	events := make(chan event.Event, 256)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.Run(ctx, func(e event.Event) {
			if len(events) < cap(events)-1 {
				events <- e
			}
			if len(events) >= 40 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(promWait):
		cancel()
		t.Fatal("Run did not end")
	}
	close(events)
	var last time.Time
	markers := 0
	for e := range events {
		if e.Time().Before(last) {
			t.Fatalf("event at %v after one at %v: %+v", e.Time(), last, e)
		}
		last = e.Time()
		if e.Marker != nil {
			markers++
		}
	}
	if markers == 0 {
		t.Error("no markers among the events: the test did not test them")
	}
}
