package pipeline

import (
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// bigRequest is a request of 65,536 chunks: about 1 MiB by Event.Size.
func bigRequest(i int) event.Event {
	return event.NewRequest(&event.Request{Seq: uint64(i), Chunks: make([]event.Chunk, 1<<16)})
}

func TestLossyBufferIsBoundedByBytes(t *testing.T) {
	t.Parallel()
	fan := NewFanout()
	size := bigRequest(0).Size()
	s := fan.SubscribeBytes("screen", 1024, 3*size, Lossy) // room for 1,024 events, 3 of them big
	for i := range 10 {
		fan.Publish(bigRequest(i))
	}
	st := s.Stats()
	if st.Delivered != 3 || st.Dropped != 7 || st.Backlog != 3 || st.Bytes != 3*size {
		t.Fatalf("stats %+v: want 3 big events held (%d bytes), 7 dropped", st, 3*size)
	}
	<-s.Events()
	fan.Publish(bigRequest(10)) // room for one again: the loss is announced (small), then 10 is dropped
	if st := s.Stats(); st.Bytes > st.MaxBytes {
		t.Fatalf("stats %+v: the buffer holds more than its byte bound", st)
	}
	<-s.Events()
	<-s.Events()
	if loss := <-s.Events(); loss.Loss == nil || loss.Loss.Events != 7 {
		t.Fatalf("got %+v, want a Loss of the 7 events that did not fit", loss)
	}
}

func TestAnEventOverTheByteBoundStillPasses(t *testing.T) {
	t.Parallel()
	fan := NewFanout()
	s := fan.SubscribeBytes("recorder", 16, 1024, Lossless) // smaller than any big request
	all := collect(s)
	for i := range 5 {
		fan.Publish(bigRequest(i)) // each waits for the one before to be taken
	}
	fan.Close()
	if got := len(<-all); got != 5 {
		t.Fatalf("lossless consumer got %d events, want 5", got)
	}
}

func TestLosslessWaitForBytesIsCounted(t *testing.T) {
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
	size := bigRequest(0).Size()
	s := fan.SubscribeBytes("recorder", 1024, 2*size, Lossless) // room for 2 big events
	fan.Publish(bigRequest(0))
	fan.Publish(bigRequest(1))
	done := make(chan struct{})
	go func() { fan.Publish(bigRequest(2)); close(done) }() // waits for bytes, not a slot
	<-waiting
	if st := s.Stats(); st.Backlog != 2 || st.Bytes != 2*size {
		t.Fatalf("stats %+v while the fan-out waits: want 2 events, %d bytes", st, 2*size)
	}
	if ev := <-s.Events(); ev.Request.Seq != 0 {
		t.Fatalf("got request %d first, want 0", ev.Request.Seq)
	}
	<-done
	if st := s.Stats(); st.Blocked != time.Second || st.Delivered != 3 || st.Backlog != 2 {
		t.Fatalf("stats %+v: want 3 delivered, 2 held and the wait counted", st)
	}
	for want := uint64(1); want <= 2; want++ {
		if ev := <-s.Events(); ev.Request.Seq != want {
			t.Fatalf("got request %d, want %d", ev.Request.Seq, want)
		}
	}
}

func TestByteCountStaysExactUnderAConcurrentConsumer(t *testing.T) {
	t.Parallel()
	fan := NewFanout()
	s := fan.SubscribeBytes("recorder", 2, 1<<30, Lossless)
	const n = 20000
	read := make(chan struct{})
	go func() {
		for range n {
			<-s.Events()
		}
		close(read)
	}()
	for i := range n {
		if i%3 == 0 {
			fan.Publish(event.NewRequest(&event.Request{Chunks: make([]event.Chunk, i%100)}))
		} else {
			fan.Publish(marker(i))
		}
	}
	<-read // everything sent has been taken
	last := marker(n)
	fan.Publish(last)
	if st := s.Stats(); st.Bytes != last.Size() {
		t.Fatalf("stats %+v: with only the last event in the buffer, want %d bytes", st, last.Size())
	}
	fan.Close()
}

// The sources wait when what waits for the stage passes the byte bound,
// and one event larger than the bound still passes alone.
func TestByteGate(t *testing.T) {
	g := newByteGate(100)
	g.take(60)
	g.take(40)
	passed := make(chan struct{})
	go func() { g.take(10); close(passed) }()
	select {
	case <-passed:
		t.Fatal("took 10 bytes over a full gate")
	default:
	}
	g.give(60)
	<-passed // event-driven: the give makes room
	g.give(40)
	g.give(10)
	g.take(1000) // alone, a huge event passes
	g.give(1000)
}
