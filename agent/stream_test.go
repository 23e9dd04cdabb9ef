package agent

import (
	"bufio"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

func TestAClientThatNeverReadsDelaysNoOneElse(t *testing.T) {
	t.Parallel()
	const n = 3000 // 15 MB of request records: more than the socket buffers hold
	a := startAgent(t, Config{Ring: RingConfig{MaxEvents: n + 1}, WriteTimeout: time.Hour})
	stuckClient(t, a.addr, "")
	healthy := []*attached{attach(t, ClientConfig{URL: a.url}), attach(t, ClientConfig{URL: a.url})}
	for _, c := range healthy {
		c.untilState(t, Streaming)
	}

	// Publish returns each time without any client reading: were it to wait
	// for the stuck client, this loop would never end.
	want := publishAll(t, a.Server, sessionEvent("rack-7"))
	want = append(want, publishAll(t, a.Server, requests(0, n)...)...)
	a.End()

	for i, c := range healthy {
		got, err := c.finish(t)
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		sameEvents(t, got, want)
	}
	if h := a.Health(); h.Clients != 1 {
		t.Fatalf("%d clients connected, want the stuck one still there", h.Clients)
	}
}

func TestADeadClientIsDroppedAndCounted(t *testing.T) {
	t.Parallel()
	a := startAgent(t, Config{WriteTimeout: 50 * time.Millisecond})
	gone := make(chan error, 1)
	a.clientGone = func(err error) { gone <- err }
	stuckClient(t, a.addr, "")
	for i := range 5000 { // until its socket buffers are full and a write times out
		if err := a.Publish(requestEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-gone:
		if err == nil {
			t.Fatal("the stream ended without an error")
		}
	case <-time.After(wait):
		t.Fatal("the dead client was never dropped")
	}
	_, metrics := get(t, a, "/metrics", "")
	for _, want := range []string{MetricClientsDropped + " 1", MetricClients + " 0"} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("/metrics lacks %q", want)
		}
	}
}

func TestAnIdleStreamGetsHeartbeats(t *testing.T) {
	t.Parallel()
	a := startAgent(t, Config{Heartbeat: time.Millisecond})
	resp := openEvents(t, a, "")
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, ":") {
		t.Fatalf("first line %q, %v: want a comment", line, err)
	}
}

func TestEventsEndpointRefusesBadRequests(t *testing.T) {
	t.Parallel()
	a := startAgent(t, Config{})
	req, _ := http.NewRequest(http.MethodGet, a.url+"/events", nil)
	req.Header.Set("Last-Event-ID", "abc")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a non-numeric Last-Event-ID: %s, want 400", resp.Status)
	}
	resp, err = http.Post(a.url+"/events", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /events: %s, want 405", resp.Status)
	}
}

func TestWireFormat(t *testing.T) {
	t.Parallel()
	a := startAgent(t, Config{})
	publishAll(t, a.Server, sessionEvent("rack-7"), requestEvent(1))
	a.End()
	resp := openEvents(t, a, "")
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" || resp.Header.Get(StreamHeader) == "" {
		t.Fatalf("headers %v", resp.Header)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	frames := strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n")
	if len(frames) != 3 || !strings.HasPrefix(frames[0], "id: 1\ndata: {") ||
		!strings.HasPrefix(frames[1], "id: 2\ndata: {") || frames[2] != "event: end\ndata: {}" {
		t.Fatalf("stream %.300q", body)
	}
	ev, err := event.Unmarshal([]byte(strings.TrimPrefix(frames[1], "id: 2\ndata: ")))
	if err != nil || ev.Request == nil || len(ev.Request.Chunks) != 128 {
		t.Fatalf("second frame: %v, %v", ev.Kind, err)
	}
}

// openEvents opens /events; the caller closes the body.
func openEvents(t *testing.T, a *agentUnderTest, lastID string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, a.url+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/events: %s", resp.Status)
	}
	return resp
}

// Past MaxClients, one more event-stream client gets 503 (and a log line),
// not a goroutine and a replay of the ring; when one leaves, another is
// served.
func TestClientsOverTheCapAreRefused(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	a := startAgent(t, Config{MaxClients: 2, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	first := stuckClient(t, a.addr, "")
	stuckClient(t, a.addr, "")
	resp, body := get(t, a, "/events", "")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "at most 2") {
		t.Fatalf("third client: %d %q, want 503 naming the cap", resp.StatusCode, body)
	}
	if !strings.Contains(logs.String(), "too many at once") {
		t.Errorf("no log line for the refused client:\n%s", logs.String())
	}
	first.Close()
	for a.Clients() > 1 { // the server sees the close on its next write or read
		select {
		case <-t.Context().Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
		_ = publishAll(t, a.Server, requests(0, 1)...)
	}
	stuckClient(t, a.addr, "") // served again
}
