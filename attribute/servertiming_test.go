package attribute

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
)

// wideRequest is clientRequest with a 55 ms server window.
func wideRequest() *event.Request {
	r := clientRequest()
	for i := range r.Stages {
		if r.Stages[i].Stage == event.StageWaitHeaders {
			r.Stages[i].Duration = 50 * ms
			r.TTFT += 20 * ms
		}
	}
	return r
}

func TestAttributeServerTiming(t *testing.T) {
	t.Parallel()
	st := func(stages map[event.Stage]time.Duration) *event.ServerTiming {
		return timing(SourceServerTiming, stages)
	}
	proxySrc := SourceServerTiming + " (the proxy's upstream time less the server's time to its headers)"
	unknownSrc := SourceServerTiming + " (a name latscope does not know: the server's own stage)"
	windowNet := func(d time.Duration, withProxy bool) (out, back event.StageTiming) {
		src := SourceServerWindowRest + " (client's server window less the server's reported arrival to first frame"
		if withProxy {
			src += " and the proxy's stage"
		}
		src += ", halved)"
		return est(event.StageNetworkOut, d/2, src), est(event.StageNetworkReturn, d-d/2, src)
	}
	out135, back135 := windowNet(13500*us, true)
	// A server that reports its prefill and nothing before it leaves the
	// rest of its window as a server wait, as llama.cpp's prompt_ms does.
	restWait := func(d time.Duration) event.StageTiming {
		return est(event.StageServerWait, d, "server_window_rest (server window less the reported prefill and the connect RTT: any queue wait plus HTTP parsing, tokenization, the server loop's turn and framing the first token; "+noteUnknown(gaugeDefault)+")")
	}
	cases := []struct {
		name string
		st   *event.ServerTiming
		want []event.StageTiming // after the client part
	}{
		{
			name: "queue and prefill only: the rest of the wait stays unattributed",
			st:   st(map[event.Stage]time.Duration{event.StageQueue: 30 * ms, event.StagePrefill: 12500 * us}),
			want: []event.StageTiming{
				netOut(100 * us),
				srv(event.StageQueue, 30*ms, SourceServerTiming),
				srv(event.StagePrefill, 12500*us, SourceServerTiming),
				netBack(100 * us),
				rest(12300 * us),
			},
		},
		{
			name: "proxy, stages and first frame: the proxy less the server, the network from the window",
			st: st(map[event.Stage]time.Duration{
				event.StageProxyUpstream: 5 * ms, event.StageServerHeaders: 3500 * us, event.StageHTTP: 500 * us,
				event.StageTokenize: 1500 * us, event.StagePrefill: 20 * ms, event.StageSSEFraming: 200 * us,
				event.StageServerFirstFrame: 40 * ms, event.StageDecode: 900 * ms,
			}),
			want: []event.StageTiming{
				out135,
				srv(event.StageProxy, 1500*us, proxySrc),
				srv(event.StageHTTP, 500*us, SourceServerTiming),
				srv(event.StageTokenize, 1500*us, SourceServerTiming),
				srv(event.StagePrefill, 20*ms, SourceServerTiming),
				srv(event.StageSSEFraming, 200*us, SourceServerTiming),
				back135,
				rest(17800 * us),
			},
		},
		{
			name: "a proxy report below the server's is kept, said so",
			st:   st(map[event.Stage]time.Duration{event.StageProxyUpstream: 2 * ms, event.StageServerHeaders: 2500 * us, event.StagePrefill: 20 * ms}),
			want: []event.StageTiming{
				netOut(100 * us),
				srv(event.StageProxy, -500*us, SourceServerTiming+" (the proxy's upstream time less the server's time to its headers; negative: the proxy reported less than the server, its clock's resolution is coarser)"),
				restWait(35300 * us),
				srv(event.StagePrefill, 20*ms, SourceServerTiming),
				netBack(100 * us),
				rest(0),
			},
		},
		{
			name: "unknown names: shown where they fit, named where they do not",
			st: st(map[event.Stage]time.Duration{event.StagePrefill: 20 * ms,
				event.ServerTimingPrefix + "db": 2 * ms, event.ServerTimingPrefix + "gen": 900 * ms}),
			want: []event.StageTiming{
				netOut(100 * us),
				restWait(32800 * us),
				srv(event.StagePrefill, 20*ms, SourceServerTiming),
				srv(event.ServerTimingPrefix+"db", 2*ms, unknownSrc),
				netBack(100 * us),
				rest(0, "server-timing gen (900ms) left out: it does not fit the server window"),
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := wideRequest()
			got := Attribute(r, AttributionInput{Server: c.st, Network: NetworkEstimate{RTT: 200 * us}})
			want := append(clientPart(), c.want...)
			if !slices.Equal(got, want) {
				t.Errorf("breakdown:\n got %v\nwant %v", got, want)
			}
			if sum := sumStages(got); sum != r.TTFT {
				t.Errorf("breakdown sums to %v, TTFT %v", sum, r.TTFT)
			}
		})
	}
}

// TestServerTimingOverHTTP: a server that sends `Server-Timing: queue;dur=30,
// prefill;dur=12.5` (and a name latscope does not know) in its trailer, met
// by the probe over real HTTP: queue 30 ms and prefill 12.5 ms, both
// server-reported, the unknown name shown under its own, the rest of the
// wait unattributed, and the breakdown adds up to the TTFT. The server holds
// its first frame 50 ms, so the reported stages fit on any host.
func TestServerTimingOverHTTP(t *testing.T) {
	t.Parallel()
	const hold = 50 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-time.After(hold): // the server's time, injected: a lower bound
		case <-r.Context().Done():
			return
		}
		chunk := `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" hi"},"finish_reason":null}]}`
		_, _ = io.WriteString(w, "data: "+chunk+"\n\ndata: [DONE]\n\n")
		w.Header().Set(http.TrailerPrefix+"Server-Timing", "queue;dur=30, prefill;dur=12.5, cache;desc=miss, db;dur=0.5")
	}))
	t.Cleanup(srv.Close)
	c, err := probe.NewClient(probe.ClientConfig{BaseURL: srv.URL, Dialect: probe.DialectOpenAIChat, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec := c.Do(ctx, probe.RequestSpec{ID: "st-http", Prompt: "hello", PromptTokens: 1, OutputTokens: 1})
	if !rec.OK() {
		t.Fatalf("outcome %s: %s", rec.Outcome, rec.Error)
	}
	got := Attribute(rec, AttributionInput{Server: rec.Server})
	find := func(s event.Stage) (event.StageTiming, bool) {
		i := slices.IndexFunc(got, func(st event.StageTiming) bool { return st.Stage == s })
		if i < 0 {
			return event.StageTiming{}, false
		}
		return got[i], true
	}
	for _, w := range []event.StageTiming{
		{Stage: event.StageQueue, Duration: 30 * ms},
		{Stage: event.StagePrefill, Duration: 12500 * us},
		{Stage: event.ServerTimingPrefix + "db", Duration: 500 * us},
	} {
		st, ok := find(w.Stage)
		if !ok || st.Duration != w.Duration || st.Provenance != event.ServerReported {
			t.Errorf("%s: %+v (present %v), want %v server-reported", w.Stage, st, ok, w.Duration)
		}
	}
	rest, ok := find(event.StageUnattributed)
	if !ok || rest.Duration < 0 || !strings.HasPrefix(rest.Source, SourceResidual) {
		t.Errorf("unattributed %+v: want the rest of the wait, not negative", rest)
	}
	if sum := sumStages(got); sum != rec.TTFT {
		t.Errorf("breakdown sums to %v, TTFT %v", sum, rec.TTFT)
	}
}
