package agent

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// agentStream is what an agent writes for a header, a request and a gap.
func agentStream(t testing.TB) []byte {
	t.Helper()
	r := newRing(RingConfig{MaxEvents: 2}, func() time.Time { return t0 })
	for _, ev := range []event.Event{sessionEvent("fuzz"), requestEvent(1), requestEvent(2), requestEvent(3)} {
		b, err := event.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		r.publish(ev.Kind, b)
	}
	r.end()
	var out []byte
	c := r.cursorFor(1, true)
	for {
		frames, _ := r.read(&c, nil)
		for _, f := range frames {
			out = append(out, f.b...)
			if f.end {
				return out
			}
		}
	}
}

const fuzzLimit = 1 << 12

// FuzzClientStream feeds arbitrary bytes to the attach client as an agent's
// stream. Whatever arrives, it must not panic, must emit only valid events
// with increasing ids, must end with a clear error, and must stay within
// its memory bound.
func FuzzClientStream(f *testing.F) {
	f.Add(agentStream(f))
	small, _ := event.Marshal(marker(1))
	for _, seed := range []string{
		"id: 1\ndata: " + string(small) + "\n\n",
		"\xef\xbb\xbfid: 1\r\ndata: " + string(small) + "\r\n\r\nid: 1\ndata: " + string(small) + "\n\n", // a repeat
		"id: 2\rdata: " + string(small) + "\r\rid: 3\ndata: {\"v\":1,\"kind\":\"marker\"}\n\n",
		"data: " + string(small) + "\n\n",                    // no id
		"id: x\ndata: {}\n\n",                                // a non-numeric id
		"id: 1\ndata: {\"v\":9}\n\n",                         // another schema
		"id: 1\ndata: not json\n\n",                          // garbage
		"id: 1\ndata: {\n\n",                                 // truncated JSON
		": keep-alive\n\nevent: other\ndata: x\n\n",          // comment, unknown frame
		"event: end\ndata: {}\n\n",                           // the end
		"id: 1\ndata: " + strings.Repeat("x", 5000) + "\n\n", // over the limit
		"id: 1\ndata: " + string(small),                      // cut off mid-event
		"id: \x00\ndata: x\n\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		c, err := NewClient(ClientConfig{URL: "http://127.0.0.1:1", MaxEventBytes: fuzzLimit})
		if err != nil {
			t.Fatal(err)
		}
		var ids []uint64  // c.lastID is the previous event's id until emit returns
		var dropped int64 // announced by the client's own Loss records
		_, err = c.read(bytes.NewReader(stream), func(ev event.Event) {
			if err := ev.Validate(); err != nil {
				t.Fatalf("emitted an invalid event: %v", err)
			}
			if ev.Loss != nil && ev.Loss.Consumer == event.ConsumerAttach {
				dropped += ev.Loss.Events
				return
			}
			ids = append(ids, c.lastID)
		})
		if got := c.Status().Duplicates; got != dropped {
			t.Fatalf("%d duplicates counted, %d announced", got, dropped)
		}
		emitted := len(ids)
		if emitted > 0 {
			ids = append(ids[1:], c.lastID)
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("ids did not increase: %v", ids)
			}
		}
		switch {
		case err == nil:
			t.Fatal("a stream that ended gave no error")
		case errors.Is(err, io.EOF), errors.Is(err, errEnded):
		case errors.Is(err, ErrProtocol):
			if !strings.Contains(err.Error(), ErrProtocol.Error()+": ") {
				t.Fatalf("a protocol error without its reason: %q", err)
			}
		default:
			t.Fatalf("unexpected error %v", err)
		}
		if got := c.Status().Events; got != int64(emitted) {
			t.Fatalf("status counts %d events, %d were emitted", got, emitted)
		}

		// The reader alone keeps its buffers within the bound.
		r := newSSEReader(bytes.NewReader(stream), fuzzLimit)
		for {
			if _, err := r.next(); err != nil {
				break
			}
		}
		if line, data := r.r.BufferCaps(); line > 3*fuzzLimit || data > 3*fuzzLimit {
			t.Fatalf("buffers grew to %d and %d bytes for a %d-byte limit", line, data, fuzzLimit)
		}
	})
}

func TestClientReadsTheAgentsOwnStream(t *testing.T) {
	t.Parallel()
	c, err := NewClient(ClientConfig{URL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	var got []event.Event
	_, err = c.read(bytes.NewReader(agentStream(t)), func(ev event.Event) { got = append(got, ev) })
	if !errors.Is(err, errEnded) {
		t.Fatalf("read = %v, want the end", err)
	}
	// Resumed after the header: a gap of one (request 1), then 2 and 3.
	if len(got) != 3 || got[0].Loss == nil || got[0].Loss.Events != 1 || got[2].Request == nil {
		t.Fatalf("got %d events: %+v", len(got), got)
	}
}

func TestSSEReaderFollowsTheStandard(t *testing.T) {
	t.Parallel()
	stream := "\xef\xbb\xbf: comment\r\n" +
		"id: 7\r\nevent: x\r\ndata: first\r\ndata\r\ndata:  third\r\n\r\n" + // CRLF, a bare field, two spaces
		"data: cr\rid\r\r" + // CR only; a bare id clears it
		"id: a\x00b\ndata: kept\n\n" + // an id with NUL is ignored
		"retry: 10\nunknown: y\n\n" + // nothing to dispatch
		"data: partial" // cut off: discarded
	r := newSSEReader(strings.NewReader(stream), 1<<10)
	var got []string
	for {
		ev, err := r.next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
		got = append(got, ev.Type+"|"+ev.ID+"|"+string(ev.Data))
	}
	want := []string{"x|7|first\n\n third", "||cr", "||kept"}
	if strings.Join(got, ";") != strings.Join(want, ";") {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestSSEReaderRefusesAnOversizedEvent(t *testing.T) {
	t.Parallel()
	for _, stream := range []string{
		"data: " + strings.Repeat("x", 2000) + "\n\n",                     // one long line
		strings.Repeat("data: "+strings.Repeat("x", 100)+"\n", 20) + "\n", // many lines
		strings.Repeat("x", 5000),                                         // no line end at all
	} {
		r := newSSEReader(strings.NewReader(stream), 1000)
		if _, err := r.next(); !errors.Is(err, errEventTooLarge) {
			t.Fatalf("%.20q...: %v, want errEventTooLarge", stream, err)
		}
	}
}
