package agent

import (
	"bytes"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// manualClock is an injected clock that moves only when told.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func newManualClock() *manualClock { return &manualClock{now: t0} }

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func marker(i int) event.Event {
	return event.NewMarker(&event.Marker{Time: t0, Kind: event.MarkerNote, Message: strconv.Itoa(i)})
}
func encode(t *testing.T, ev event.Event) []byte {
	t.Helper()
	b, err := event.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sent is one frame as a client reads it.
type sent struct {
	id   uint64
	what string // "header", "m<N>" for marker N, "loss<N>" for a gap of N, "end"
}

func (s sent) String() string { return fmt.Sprintf("%d:%s", s.id, s.what) }

// drain reads everything the ring has for c now.
func drain(t *testing.T, r *ring, c *cursor) []sent {
	t.Helper()
	var out []sent
	for {
		frames, wake := r.read(c, nil)
		if wake != nil {
			return out
		}
		for _, f := range frames {
			if f.end {
				return append(out, sent{what: "end"})
			}
			out = append(out, parseFrame(t, f.b))
		}
	}
}

func parseFrame(t *testing.T, b []byte) sent {
	t.Helper()
	idLine, rest, _ := bytes.Cut(b, []byte("\n"))
	id, err := strconv.ParseUint(string(bytes.TrimPrefix(idLine, []byte("id: "))), 10, 64)
	if err != nil {
		t.Fatalf("frame %q: %v", b, err)
	}
	ev, err := event.Unmarshal(bytes.TrimSuffix(bytes.TrimPrefix(rest, []byte("data: ")), []byte("\n\n")))
	if err != nil {
		t.Fatalf("frame %q: %v", b, err)
	}
	s := sent{id: id}
	switch {
	case ev.Session != nil:
		s.what = "header"
	case ev.Marker != nil:
		s.what = "m" + ev.Marker.Message
	case ev.Loss != nil:
		s.what = fmt.Sprintf("loss%d", ev.Loss.Events)
	}
	return s
}

func publishMarkers(t *testing.T, r *ring, from, to int) {
	t.Helper()
	for i := from; i <= to; i++ {
		r.publish(event.KindMarker, encode(t, marker(i)))
	}
}

// ringCase is one of TestRing's cases.
type ringCase struct {
	name   string
	cfg    RingConfig
	setup  func(t *testing.T, r *ring, clock *manualClock)
	resume bool
	after  uint64
	want   string
}

// ringCases are TestRing's cases; header is the session header encoded.
func ringCases(header []byte) []ringCase {
	return append(ringCasesFirst(header), ringCasesSecond(header)...)
}

// ringCasesFirst are the first half of TestRing's cases.
func ringCasesFirst(header []byte) []ringCase {
	return []ringCase{
		{
			name: "a new client gets the header, then the whole ring",
			cfg:  RingConfig{MaxEvents: 10},
			setup: func(t *testing.T, r *ring, _ *manualClock) {
				r.publish(event.KindSession, header)
				publishMarkers(t, r, 2, 4)
			},
			want: "[1:header 2:m2 3:m3 4:m4]",
		},
		{
			name: "a resumed client gets exactly what follows its id",
			cfg:  RingConfig{MaxEvents: 10},
			setup: func(t *testing.T, r *ring, _ *manualClock) {
				r.publish(event.KindSession, header)
				publishMarkers(t, r, 2, 6)
			},
			resume: true, after: 4,
			want: "[5:m5 6:m6]",
		},
		{
			name: "a client that has everything gets nothing",
			cfg:  RingConfig{MaxEvents: 10},
			setup: func(t *testing.T, r *ring, _ *manualClock) {
				publishMarkers(t, r, 1, 3)
			},
			resume: true, after: 3,
			want: "[]",
		},
		{
			name: "a client older than the ring gets an exact gap, then the oldest held",
			cfg:  RingConfig{MaxEvents: 3},
			setup: func(t *testing.T, r *ring, _ *manualClock) {
				r.publish(event.KindSession, header)
				publishMarkers(t, r, 2, 10) // holds 8, 9, 10
			},
			resume: true, after: 2,
			want: "[7:loss5 8:m8 9:m9 10:m10]",
		},
		{
			name: "a new client still gets the header after it left the ring",
			cfg:  RingConfig{MaxEvents: 3},
			setup: func(t *testing.T, r *ring, _ *manualClock) {
				r.publish(event.KindSession, header)
				publishMarkers(t, r, 2, 10)
			},
			want: "[7:header 8:m8 9:m9 10:m10]",
		},
		{
			name: "a gap over an evicted header sends the header in its place",
			cfg:  RingConfig{MaxEvents: 3},
			setup: func(t *testing.T, r *ring, _ *manualClock) {
				publishMarkers(t, r, 1, 3)
				r.publish(event.KindSession, header) // id 4: a new session
				publishMarkers(t, r, 5, 10)
			},
			resume: true, after: 1,
			want: "[3:loss2 4:header 7:loss3 8:m8 9:m9 10:m10]",
		},
	}
}

// ringCasesSecond are the second half of TestRing's cases.
func ringCasesSecond(header []byte) []ringCase {
	return []ringCase{
		{
			name: "a new client starts at the current session's header",
			cfg:  RingConfig{MaxEvents: 10},
			setup: func(t *testing.T, r *ring, _ *manualClock) {
				publishMarkers(t, r, 1, 3)
				r.publish(event.KindSession, header)
				publishMarkers(t, r, 5, 6)
			},
			want: "[4:header 5:m5 6:m6]",
		},
		{
			name: "events older than the age bound leave the ring",
			cfg:  RingConfig{MaxEvents: 10, MaxAge: time.Minute},
			setup: func(t *testing.T, r *ring, clock *manualClock) {
				r.publish(event.KindSession, header)
				publishMarkers(t, r, 2, 5)
				clock.Add(time.Minute + time.Nanosecond)
				publishMarkers(t, r, 6, 6)
			},
			resume: true, after: 3,
			want: "[5:loss2 6:m6]",
		},
		{
			name: "age eviction happens on read too, with no publish",
			cfg:  RingConfig{MaxEvents: 10, MaxAge: time.Minute},
			setup: func(t *testing.T, r *ring, clock *manualClock) {
				r.publish(event.KindSession, header)
				publishMarkers(t, r, 2, 5)
				clock.Add(2 * time.Minute)
			},
			want: "[5:header]",
		},
		{
			name: "the byte bound evicts, but keeps the newest",
			cfg:  RingConfig{MaxEvents: 10, MaxBytes: 1},
			setup: func(t *testing.T, r *ring, _ *manualClock) {
				publishMarkers(t, r, 1, 4)
			},
			resume: true, after: 1,
			want: "[3:loss2 4:m4]",
		},
		{
			name: "an id this ring never issued (the agent restarted) starts afresh",
			cfg:  RingConfig{MaxEvents: 10},
			setup: func(t *testing.T, r *ring, _ *manualClock) {
				r.publish(event.KindSession, header)
				publishMarkers(t, r, 2, 3)
			},
			resume: true, after: 99,
			want: "[1:header 2:m2 3:m3]",
		},
		{
			name: "an ended stream closes with the end frame after the last event",
			cfg:  RingConfig{MaxEvents: 10},
			setup: func(t *testing.T, r *ring, _ *manualClock) {
				publishMarkers(t, r, 1, 2)
				r.end()
			},
			want: "[1:m1 2:m2 0:end]",
		},
	}
}

func TestRing(t *testing.T) {
	t.Parallel()
	header := encode(t, sessionEvent("a"))
	tests := ringCases(header)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := newManualClock()
			r := newRing(tt.cfg, clock.Now)
			tt.setup(t, r, clock)
			c := r.cursorFor(tt.after, tt.resume)
			if got := fmt.Sprint(drain(t, r, &c)); got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestRingCursorCutAnywhereLosesNothingTwice(t *testing.T) {
	t.Parallel()
	// A client may be cut after any frame; resuming from that frame's id
	// must neither repeat nor lose anything, gaps included.
	clock := newManualClock()
	r := newRing(RingConfig{MaxEvents: 3}, clock.Now)
	publishMarkers(t, r, 1, 3)
	r.publish(event.KindSession, encode(t, sessionEvent("a")))
	publishMarkers(t, r, 5, 10)
	c := r.cursorFor(1, true)
	full := drain(t, r, &c)
	for cutAfter := range full {
		c := r.cursorFor(1, true)
		frames, _ := r.read(&c, nil)
		resumeAt := parseFrame(t, frames[cutAfter].b).id
		c = r.cursorFor(resumeAt, true)
		got := append(append([]sent{}, full[:cutAfter+1]...), drain(t, r, &c)...)
		if fmt.Sprint(got) != fmt.Sprint(full) {
			t.Fatalf("cut after frame %d: got %v, want %v", cutAfter, got, full)
		}
	}
}

func TestRingWakesWaitingReaders(t *testing.T) {
	t.Parallel()
	r := newRing(RingConfig{}, time.Now)
	c := r.cursorFor(0, false)
	frames, wake := r.read(&c, nil)
	if len(frames) != 0 || wake == nil {
		t.Fatalf("empty ring: got %d frames, wake %v", len(frames), wake)
	}
	r.publish(event.KindMarker, encode(t, marker(1)))
	select {
	case <-wake:
	default:
		t.Fatal("publish did not wake the reader")
	}
	if frames, _ := r.read(&c, nil); len(frames) != 1 {
		t.Fatalf("after the wake: %d frames, want 1", len(frames))
	}
}

func TestRingStaysWithinItsBound(t *testing.T) {
	t.Parallel()
	r := newRing(RingConfig{MaxEvents: 100}, time.Now)
	data := encode(t, marker(0))
	for range 100_000 {
		r.publish(event.KindMarker, data)
	}
	if st := r.stats(); st.Events != 100 || st.LastID != 100_000 || st.FirstID != 99_901 {
		t.Fatalf("stats %+v", st)
	}
	if c := cap(r.entries); c > 2*100+1024*2 {
		t.Fatalf("entries capacity %d: the ring's memory grows with what it published", c)
	}
}
