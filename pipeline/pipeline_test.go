package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

func marker(i int) event.Event {
	return event.NewMarker(&event.Marker{Time: time.Unix(int64(i), 0), Kind: event.MarkerNote, Message: fmt.Sprint(i)})
}

func collect(s *Subscription) <-chan []event.Event {
	out := make(chan []event.Event, 1)
	go func() {
		var got []event.Event
		for ev := range s.Events() {
			got = append(got, ev)
		}
		out <- got
	}()
	return out
}

func TestRunDeliversEverythingInOrderToEveryLosslessConsumer(t *testing.T) {
	t.Parallel()
	fan := NewFanout()
	a, b := collect(fan.Subscribe("a", 1, Lossless)), collect(fan.Subscribe("b", 7, Lossless))
	src := SourceFunc(func(ctx context.Context, emit func(event.Event)) error {
		for i := range 5000 {
			emit(marker(i))
		}
		return nil
	})
	hdr := &event.Session{Target: "http://x"}
	if _, err := Run(context.Background(), Config{Header: hdr, Primary: []Source{src}, Buffer: 3}, fan); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]<-chan []event.Event{"a": a, "b": b} {
		got := <-ch
		if len(got) != 5001 || got[0].Session == nil {
			t.Fatalf("%s: got %d events (first %v), want the header then 5000", name, len(got), got[0].Kind)
		}
		for i, ev := range got[1:] {
			if ev.Marker.Message != fmt.Sprint(i) {
				t.Fatalf("%s: event %d is %q: out of order", name, i, ev.Marker.Message)
			}
		}
	}
}

func TestLossyConsumerNeverHoldsUpTheOthersAndCountsItsLoss(t *testing.T) {
	t.Parallel()
	fan := NewFanout()
	stuck := fan.Subscribe("screen", 4, Lossy) // never read until the end
	all := collect(fan.Subscribe("aggregator", 16, Lossless))
	for i := range 1000 {
		fan.Publish(marker(i))
	}
	fan.Close()
	if got := len(<-all); got != 1000 {
		t.Fatalf("lossless consumer got %d events, want 1000", got)
	}
	st := stuck.Stats()
	if st.Dropped != 996 || st.Delivered != 4 {
		t.Fatalf("lossy stats %+v: want 4 delivered, 996 dropped", st)
	}
}

func TestLossyConsumerIsToldWhatItMissed(t *testing.T) {
	t.Parallel()
	fan := NewFanout()
	s := fan.Subscribe("screen", 2, Lossy)
	for i := range 5 {
		fan.Publish(marker(i)) // 0 and 1 fit; 2, 3, 4 are lost
	}
	<-s.Events()
	<-s.Events()
	fan.Publish(marker(5)) // room again: the loss is announced first, then 5 fits
	loss := <-s.Events()
	if loss.Loss == nil || loss.Loss.Events != 3 || loss.Loss.Consumer != "screen" {
		t.Fatalf("got %+v, want a Loss of 3 events", loss)
	}
	if ev := <-s.Events(); ev.Marker == nil || ev.Marker.Message != "5" {
		t.Fatalf("after the loss got %+v, want event 5", ev)
	}
}

func TestLosslessWaitIsCounted(t *testing.T) {
	t.Parallel()
	fan := NewFanout()
	var clock time.Time
	waiting := make(chan struct{})
	fan.now = func() time.Time { // read just before the fan-out waits, and after
		if clock.IsZero() {
			close(waiting)
		}
		clock = clock.Add(time.Second)
		return clock
	}
	s := fan.Subscribe("recorder", 1, Lossless)
	fan.Publish(marker(0))
	done := make(chan struct{})
	go func() { fan.Publish(marker(1)); close(done) }() // waits for the reader
	<-waiting
	<-s.Events()
	<-done
	if st := s.Stats(); st.Blocked != time.Second || st.Delivered != 2 {
		t.Fatalf("stats %+v: want 2 delivered and the wait counted", st)
	}
}

func TestUnsubscribeReleasesAWaitingPublish(t *testing.T) {
	t.Parallel()
	fan := NewFanout()
	s := fan.Subscribe("gone", 1, Lossless)
	fan.Publish(marker(0))
	done := make(chan struct{})
	go func() { fan.Publish(marker(1)); close(done) }()
	fan.Unsubscribe(s)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Publish still waits for a consumer that unsubscribed")
	}
}

// settlingStage passes events on and settles only once it has seen a span,
// like the attributor waiting for a late server span.
type settlingStage struct {
	sawSpan chan struct{}
}

func (s *settlingStage) Run(ctx context.Context, in <-chan event.Event, out chan<- event.Event) {
	defer close(out)
	for ev := range in {
		if ev.Span != nil {
			close(s.sawSpan)
		}
		out <- ev
	}
}

func (s *settlingStage) Settle(ctx context.Context) { <-s.sawSpan }

func TestAuxSourcesRunUntilTheStageSettles(t *testing.T) {
	t.Parallel()
	fan := NewFanout()
	got := collect(fan.Subscribe("agg", 16, Lossless))
	primaryDone := make(chan struct{})
	primary := SourceFunc(func(ctx context.Context, emit func(event.Event)) error {
		emit(marker(1))
		close(primaryDone)
		return nil
	})
	var auxErr error
	aux := SourceFunc(func(ctx context.Context, emit func(event.Event)) error {
		<-primaryDone
		emit(event.NewSpan(&event.Span{RequestID: "late"})) // after the primary ended
		<-ctx.Done()
		auxErr = ctx.Err()
		return ctx.Err()
	})
	_, err := Run(context.Background(), Config{Primary: []Source{primary}, Aux: []Source{aux}, Stage: &settlingStage{sawSpan: make(chan struct{})}}, fan)
	if err != nil {
		t.Fatalf("Run: %v (an aux source stopped by the pipeline is not an error)", err)
	}
	evs := <-got
	if len(evs) != 2 || evs[1].Span == nil {
		t.Fatalf("got %d events %v, want the marker then the late span", len(evs), evs)
	}
	if !errors.Is(auxErr, context.Canceled) {
		t.Fatalf("aux source ended with %v, want it cancelled by the pipeline", auxErr)
	}
}

func TestRunReturnsPrimaryErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	_, err := Run(context.Background(), Config{Primary: []Source{SourceFunc(func(context.Context, func(event.Event)) error { return boom })}}, NewFanout())
	if !errors.Is(err, boom) {
		t.Fatalf("Run = %v, want boom", err)
	}
}

func TestCtrlCStillDeliversWhatSourcesEmitWhileStopping(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	fan := NewFanout()
	got := collect(fan.Subscribe("agg", 1, Lossless))
	src := SourceFunc(func(ctx context.Context, emit func(event.Event)) error {
		emit(marker(0))
		cancel()
		<-ctx.Done()
		for i := 1; i <= 100; i++ { // the cancelled requests' records
			emit(marker(i))
		}
		return nil
	})
	if res, err := Run(ctx, Config{Primary: []Source{src}, Buffer: 1}, fan); err != nil || !res.Interrupted {
		t.Fatalf("Run = %+v, %v: want interrupted, no error", res, err)
	}
	if n := len(<-got); n != 101 {
		t.Fatalf("got %d events after Ctrl-C, want all 101", n)
	}
}

func TestLatestKeepsTheNewest(t *testing.T) {
	t.Parallel()
	l := NewLatest[int]()
	if _, v := l.Get(); v != 0 {
		t.Fatalf("version before any Put = %d", v)
	}
	var wg sync.WaitGroup
	for i := 1; i <= 100; i++ {
		l.Put(i)
	}
	wg.Wait()
	<-l.Changed()
	if v, ver := l.Get(); v != 100 || ver != 100 {
		t.Fatalf("Get = %d (version %d), want 100", v, ver)
	}
	select {
	case <-l.Changed():
		t.Fatal("one wake-up per unread change, not one per Put")
	default:
	}
}

func TestInterruptionIsDecidedWhenThePrimariesEnd(t *testing.T) {
	t.Parallel()
	// A consumer that cancels ctx on seeing the stream end must not make a
	// finished run look interrupted.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fan := NewFanout()
	sub := fan.Subscribe("viewer", 16, Lossless)
	go func() {
		for range sub.Events() {
		}
		cancel()
	}()
	res, err := Run(ctx, Config{Primary: []Source{SourceFunc(func(context.Context, func(event.Event)) error { return nil })}}, fan)
	if err != nil || res.Interrupted {
		t.Fatalf("Run = %+v, %v: a run whose sources ended by themselves is not interrupted", res, err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	failed := errors.New("source failed")
	res, err = Run(ctx2, Config{Primary: []Source{SourceFunc(func(ctx context.Context, _ func(event.Event)) error {
		cancel2()
		<-ctx.Done()
		return failed
	})}}, NewFanout())
	// Interrupted is the result's, not an error joined to the source's.
	if !res.Interrupted || !errors.Is(err, failed) || err.Error() != failed.Error() {
		t.Fatalf("Run = %+v, %v: want interrupted, and only the source's own error", res, err)
	}
}

// countingSettler takes events only once the primary has emitted them all
// (so they wait in the pipeline's buffer), and notes how many it had taken
// when it was asked to settle. Like the attributor, it answers Settle from
// its own loop, after the events it has received.
type countingSettler struct {
	start    chan struct{}
	settle   chan chan int
	atSettle int
}

func (s *countingSettler) Run(ctx context.Context, in <-chan event.Event, out chan<- event.Event) {
	defer close(out)
	<-s.start
	taken := 0
	for {
		select {
		case ev, ok := <-in:
			if !ok {
				return
			}
			taken++
			out <- ev
		case reply := <-s.settle:
			reply <- taken
		}
	}
}

func (s *countingSettler) Settle(ctx context.Context) {
	reply := make(chan int)
	s.settle <- reply
	s.atSettle = <-reply
}

// TestSettleSeesEveryPrimaryEvent: a stage is asked to settle only once it
// has taken every event the primaries emitted, however many still waited in
// the pipeline's buffer when they ended; otherwise the attributor would let
// the span receiver stop while requests it never saw still wanted spans.
func TestSettleSeesEveryPrimaryEvent(t *testing.T) {
	t.Parallel()
	const n = 2000
	fan := NewFanout()
	got := collect(fan.Subscribe("agg", 16, Lossless))
	stage := &countingSettler{start: make(chan struct{}), settle: make(chan chan int), atSettle: -1}
	primary := SourceFunc(func(ctx context.Context, emit func(event.Event)) error {
		for i := range n {
			emit(marker(i))
		}
		close(stage.start)
		return nil
	})
	if _, err := Run(context.Background(), Config{Primary: []Source{primary}, Stage: stage, Buffer: 4 * n}, fan); err != nil {
		t.Fatal(err)
	}
	if evs := <-got; len(evs) != n {
		t.Fatalf("got %d events, want %d", len(evs), n)
	}
	if stage.atSettle != n {
		t.Fatalf("asked to settle with %d of the %d events taken (-1: never asked)", stage.atSettle, n)
	}
}
