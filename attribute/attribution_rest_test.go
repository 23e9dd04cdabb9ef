package attribute

import (
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// splitWindow is clientRequest with a server window of headers (the wait
// for the headers) and then first more to the first token, its TTFT
// following.
func splitWindow(headers, first time.Duration) *event.Request {
	r := clientRequest()
	for i, s := range r.Stages {
		switch s.Stage {
		case event.StageWaitHeaders:
			r.TTFT += headers - s.Duration
			r.Stages[i].Duration = headers
		case event.StageFirstToken:
			r.TTFT += first - s.Duration
			r.Stages[i].Duration = first
		}
	}
	return r
}

// headersWithFirstToken is clientRequest as a server that sends its headers
// with the first token (the newer llama-server) leaves it: the whole 35 ms
// server window is the wait for the headers.
func headersWithFirstToken() *event.Request { return splitWindow(34950*us, 50*us) }

// headersBeforeSlot is clientRequest as llama-server leaves it when it sends
// the headers at once and the request then waits for a slot: 2 ms for the
// headers, 33 ms more to the first token.
func headersBeforeSlot() *event.Request { return splitWindow(2*ms, 33*ms) }

// TestAttributeRestQueue: a server that reports its prefill but no queue,
// and whose headers tell nothing (they come with the first token), gets the
// rest of its server window as an estimated queue only when its queue gauge
// showed requests waiting, else as a server wait (front end and queue, not
// told apart); the breakdown still adds up to the TTFT.
func TestAttributeRestQueue(t *testing.T) {
	t.Parallel()
	llama := timing("llamacpp.timings", map[event.Stage]time.Duration{event.StagePrefill: 12 * ms, event.StageDecode: 300 * ms})
	const left = 35*ms - 12*ms - 200*us // the window less the prefill and the round trip
	cases := []struct {
		name  string
		r     *event.Request
		st    *event.ServerTiming
		queue QueueGauge
		front FrontEndFloor
		want  []event.StageTiming // after the client part
	}{
		{
			name: "requests waiting, no earlier wait: the rest is an estimated queue", r: headersWithFirstToken(), st: llama, queue: QueueWaiting,
			want: []event.StageTiming{netOut(100 * us), est(event.StageQueue, left, windowRestSrc(true, noteWaiting(gaugeDefault)+"; "+noteNoFloor)),
				srv(event.StagePrefill, 12*ms, "llamacpp.timings"), netBack(100 * us), rest(0)},
		},
		{
			name: "requests waiting: the wait beyond the front end's floor is the queue", r: headersWithFirstToken(), st: llama, queue: QueueWaiting,
			front: FrontEndFloor{Wait: 3 * ms, Requests: 12},
			want: []event.StageTiming{netOut(100 * us), est(event.StageServerWait, 3*ms, windowRestSrc(true, noteFloor(12, "3ms"))),
				est(event.StageQueue, left-3*ms, windowRestSrc(true, noteWaiting(gaugeDefault)+"; the wait beyond "+noteFloor(12, "3ms"))),
				srv(event.StagePrefill, 12*ms, "llamacpp.timings"), netBack(100 * us), rest(0)},
		},
		{
			name: "requests waiting, a wait no longer than the floor: no queue", r: headersWithFirstToken(), st: llama, queue: QueueWaiting,
			front: FrontEndFloor{Wait: 40 * ms, Requests: 3},
			want: []event.StageTiming{netOut(100 * us), est(event.StageServerWait, left, windowRestSrc(true, noteFloor(3, "40ms"))),
				srv(event.StagePrefill, 12*ms, "llamacpp.timings"), netBack(100 * us), rest(0)},
		},
		{
			name: "no request waiting: the rest is a server wait, and says why", r: headersWithFirstToken(), st: llama, queue: QueueEmpty,
			want: []event.StageTiming{netOut(100 * us), est(event.StageServerWait, left, windowRestSrc(true, noteEmpty(gaugeDefault))),
				srv(event.StagePrefill, 12*ms, "llamacpp.timings"), netBack(100 * us), rest(0)},
		},
		{
			name: "no queue reading: a server wait", r: headersWithFirstToken(), st: llama, queue: QueueUnknown,
			want: []event.StageTiming{netOut(100 * us), est(event.StageServerWait, left, windowRestSrc(true, noteUnknown(gaugeDefault))),
				srv(event.StagePrefill, 12*ms, "llamacpp.timings"), netBack(100 * us), rest(0)},
		},
		{
			name: "headers at slot time, requests waiting: the slot wait taken as an estimated queue, no second one", r: clientRequest(), queue: QueueWaiting,
			st: timing("llamacpp.timings", map[event.Stage]time.Duration{event.StagePrefill: 4 * ms}),
			want: []event.StageTiming{netOut(100 * us), est(event.StageQueue, 30*ms-200*us, llamaSlotSource(noteWaiting(gaugeDefault)+"; "+noteNoFloor)),
				srv(event.StagePrefill, 4*ms, "llamacpp.timings"), netBack(100 * us), rest(1 * ms)},
		},
		{
			name: "headers before a slot took it: the wait after them is the rest of the window", r: headersBeforeSlot(), queue: QueueWaiting,
			st: timing("llamacpp.timings", map[event.Stage]time.Duration{event.StagePrefill: 4 * ms}),
			want: []event.StageTiming{netOut(100 * us), est(event.StageQueue, 35*ms-4*ms-200*us, windowRestSrc(true, noteWaiting(gaugeDefault)+"; "+noteNoFloor)),
				srv(event.StagePrefill, 4*ms, "llamacpp.timings"), netBack(100 * us), rest(0)},
		},
		{
			name: "a server that reports its queue: nothing added", r: headersWithFirstToken(), queue: QueueWaiting,
			st: timing("ollama.final", map[event.Stage]time.Duration{"load": 3 * ms, event.StagePrefill: 10 * ms}),
			want: []event.StageTiming{netOut(100 * us), srv(event.StageQueue, 3*ms, "ollama.final (load_duration: queue wait and model load)"),
				srv(event.StagePrefill, 10*ms, "ollama.final (prompt_eval)"), netBack(100 * us), rest(35*ms - 13*ms - 200*us)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Attribute(tc.r, AttributionInput{Server: tc.st, Network: NetworkEstimate{RTT: 200 * us}, ServerKind: "llamacpp", Queue: tc.queue, FrontEnd: tc.front})
			want := append(clientPart(), tc.want...)
			if len(got) != len(want) {
				t.Fatalf("got %d stages, want %d:\n got %v\nwant %v", len(got), len(want), got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("stage %d = %+v,\n            want %+v", i, got[i], want[i])
				}
			}
			checkSum(t, tc.r, got)
		})
	}
}

// TestQueueReadingsDuring: the readings taken while a request was at the
// server, and the last one before it arrived, decide; stale samples and
// readings after the request do not.
func TestQueueReadingsDuring(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1767000000, 0)
	sample := func(at time.Duration, waiting float64, stale bool) *event.ServerSample {
		return &event.ServerSample{Time: t0.Add(at), Waiting: &waiting, Stale: stale}
	}
	var q queueReadings
	if got := q.during(t0, t0.Add(time.Second)); got != QueueUnknown {
		t.Fatalf("no readings: %v, want unknown", got)
	}
	for _, s := range []*event.ServerSample{
		sample(0, 0, false), sample(time.Second, 0, false), sample(2*time.Second, 3, false),
		sample(3*time.Second, 0, false), sample(4*time.Second, 5, true), sample(5*time.Second, 0, false),
		{Time: t0.Add(6 * time.Second)}, // no gauge
	} {
		q.add(s)
	}
	for _, tc := range []struct {
		from, to time.Duration
		want     QueueGauge
	}{
		{1500 * ms, 1800 * ms, QueueEmpty},   // between readings: the one at 1 s
		{1500 * ms, 2500 * ms, QueueWaiting}, // the reading at 2 s
		{2500 * ms, 2600 * ms, QueueWaiting}, // arrived into the queue the 2 s reading saw
		{3000 * ms, 4500 * ms, QueueEmpty},   // the stale 4 s repeat is no reading
		{500 * ms, 900 * ms, QueueEmpty},     // a reading after the first token does not count
		{-2 * time.Second, -time.Second, QueueUnknown},
	} {
		if got := q.during(t0.Add(tc.from), t0.Add(tc.to)); got != tc.want {
			t.Errorf("during(%v, %v) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
	// Readings older than intervalMemoryAge are forgotten.
	q.add(sample(intervalMemoryAge+2*time.Second+time.Millisecond, 0, false))
	if got := q.during(t0.Add(2500*ms), t0.Add(2600*ms)); got != QueueUnknown {
		t.Errorf("after the 2 s reading aged out: %v, want unknown", got)
	}
}

// TestAttributorRestQueueFromGauge: the attributor reads the queue gauge of
// the samples that passed through it against each request's time at the
// server; the wait of a request that found no queue is the front end's
// floor, and a later queued request's queue is only its wait beyond it.
func TestAttributorRestQueueFromGauge(t *testing.T) {
	t.Parallel()
	at := time.Unix(1767000000, 0)
	deferred := func(d time.Duration, n float64) event.Event {
		return event.NewServer(&event.ServerSample{Time: at.Add(d), Dialect: "llamacpp", Waiting: &n})
	}
	request := func(id string, start, window time.Duration) event.Event {
		r := splitWindow(window-50*us, 50*us) // headers with the first token
		r.ID, r.Start, r.Intended = id, at.Add(start), at.Add(start)
		r.Server = timing("llamacpp.timings", map[event.Stage]time.Duration{event.StagePrefill: 12 * ms})
		return event.NewRequest(r)
	}
	p := startPipeline(t, AttributorConfig{Server: "llamacpp"})
	p.send(t, deferred(0, 3))
	p.next(t)
	p.send(t, request("queued", 500*ms, 35*ms))
	if got := p.next(t).Request; !hasStage(got, event.StageQueue, event.Estimated) {
		t.Errorf("with 3 requests deferred: %v, want an estimated queue", got.Breakdown)
	}
	p.send(t, deferred(time.Second, 0))
	p.next(t)
	p.send(t, request("alone", 1500*ms, 16*ms)) // a 3.8 ms server wait: 16 ms less 12 of prefill and 0.2 of round trip
	if got := p.next(t).Request; hasStage(got, event.StageQueue, event.Estimated) {
		t.Errorf("with none deferred: %v, want no queue", got.Breakdown)
	}
	p.send(t, deferred(2*time.Second, 5))
	p.next(t)
	p.send(t, request("queued after", 2500*ms, 35*ms))
	got := p.next(t).Request
	wait, _ := stageOf(got, event.StageServerWait)
	queue, _ := stageOf(got, event.StageQueue)
	if wait.Duration != 3800*us || queue.Duration != 35*ms-12*ms-200*us-3800*us {
		t.Errorf("after a request found no queue in 3.8 ms: server wait %v, queue %v, want 3.8ms and the rest", wait.Duration, queue.Duration)
	}
}
