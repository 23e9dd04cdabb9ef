package probe

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// frames returns the bytes of the frames write writes.
func frames(t *testing.T, write func(f *http2.Framer) error) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := write(http2.NewFramer(&b, nil)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// nopConn is a connection that takes every write and reads nothing: the
// tests hand the sniffer's scanners their bytes themselves.
type nopConn struct{ net.Conn }

func (nopConn) Write(p []byte) (int, error) { return len(p), nil }

// serverSends feeds b to s as reads from the server, a byte at a time, so
// that every frame is split across reads.
func serverSends(s *sniffConn, b []byte) {
	for i := range b {
		at := time.Now()
		s.mu.Lock()
		if _, fr, payload, ok := s.rd.next(b[i : i+1]); ok {
			s.serverFrame(fr, payload, at)
		}
		s.mu.Unlock()
	}
}

func TestSniffCountsTheServersWaitForTheClientsWindow(t *testing.T) {
	s := newSniffConn(nopConn{}, nopConn{}, 1)
	w := func(b []byte) {
		if _, err := s.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	w([]byte(http2.ClientPreface))
	w(frames(t, func(f *http2.Framer) error {
		if err := f.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 100}); err != nil {
			return err
		}
		return f.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x82}, EndHeaders: true, EndStream: true})
	}))
	st := s.claimLatest()
	if st == nil || st.id != 1 || s.wroteAll(st).IsZero() {
		t.Fatalf("claimed %+v after the HEADERS of stream 1 (END_STREAM)", st)
	}
	serverSends(s, frames(t, func(f *http2.Framer) error {
		if err := f.WriteSettings(); err != nil {
			return err
		}
		if err := f.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x88}, EndHeaders: true}); err != nil {
			return err
		}
		return f.WriteData(1, false, make([]byte, 100)) // the window, used up
	}))
	w(frames(t, func(f *http2.Framer) error { return f.WriteWindowUpdate(1, 100) }))
	serverSends(s, frames(t, func(f *http2.Framer) error { return f.WriteData(1, true, make([]byte, 10)) }))
	got := s.snapshot(st)
	if got.frames != 2 || got.recvStalls != 1 || got.sendStalls != 0 || got.headers.IsZero() || got.firstData.IsZero() {
		t.Errorf("figures %+v: want 2 DATA frames, 1 stall waiting for the client's window, headers and first DATA stamped", got)
	}
	if len(s.streams) != 0 || s.stalledRecv != 0 {
		t.Errorf("after END_STREAM: %d streams tracked, %d stalled; want none", len(s.streams), s.stalledRecv)
	}
}

func TestSniffCountsTheRequestsWaitForTheServersWindow(t *testing.T) {
	s := newSniffConn(nopConn{}, nopConn{}, 1)
	w := func(write func(f *http2.Framer) error) {
		if _, err := s.Write(frames(t, write)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	serverSends(s, frames(t, func(f *http2.Framer) error {
		return f.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 50})
	}))
	w(func(f *http2.Framer) error {
		return f.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: []byte{0x83}, EndHeaders: true})
	})
	w(func(f *http2.Framer) error { return f.WriteData(3, false, make([]byte, 50)) })
	st := s.claimLatest()
	serverSends(s, frames(t, func(f *http2.Framer) error { return f.WriteWindowUpdate(3, 50) }))
	w(func(f *http2.Framer) error { return f.WriteData(3, true, make([]byte, 10)) })
	serverSends(s, frames(t, func(f *http2.Framer) error { return f.WriteGoAway(3, http2.ErrCodeNo, nil) }))
	got := s.snapshot(st)
	if got.sendStalls != 1 || got.recvStalls != 0 || s.wroteAll(st).IsZero() {
		t.Errorf("figures %+v: want 1 stall waiting for the server's window, the request written whole", got)
	}
	if away, last := s.goingAway(); !away || last != 3 {
		t.Errorf("goingAway = %v, %d; want true, 3", away, last)
	}
}

func TestFrameScannerSkipsWhatItNeedNotKeep(t *testing.T) {
	var sc frameScanner
	b := frames(t, func(f *http2.Framer) error {
		if err := f.WriteData(5, false, bytes.Repeat([]byte("x"), 1000)); err != nil {
			return err
		}
		return f.WriteWindowUpdate(0, 7)
	})
	var got []frameHeader
	for p := b; len(p) > 0; {
		used, fr, payload, ok := sc.next(p[:min(len(p), 7)])
		p = p[used:]
		if ok {
			got = append(got, fr)
			if fr.typ == frameWindowUpdate && (len(payload) != 4 || payload[3] != 7) {
				t.Errorf("WINDOW_UPDATE payload %v", payload)
			}
		}
	}
	if len(got) != 2 || got[0] != (frameHeader{length: 1000, typ: frameData, stream: 5}) || got[1].typ != frameWindowUpdate {
		t.Errorf("frames %+v", got)
	}
}

// tracedPost posts body through hc and returns the answer's body and the
// stream's connection.
func tracedPost(t *testing.T, hc *http.Client, url string, body []byte) (string, *h2StreamConn) {
	t.Helper()
	var sc *h2StreamConn
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		sc, _ = info.Conn.(*h2StreamConn)
	}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if sc == nil {
		t.Fatal("no HTTP/2 stream connection in the trace")
	}
	return string(got), sc
}

func TestH2RequestBodyWaitsForTheServersWindow(t *testing.T) {
	// The server opens the windows only once the request has used up the
	// first 65,535 bytes of them: a larger body must wait for that.
	url := frameServer(t, false)
	tr, err := NewH2Transport(H2Config{H2C: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	body := make([]byte, 100<<10)
	_, _ = rand.Read(body)
	got, sc := tracedPost(t, &http.Client{Transport: tr}, url, body)
	if got != "ok" {
		t.Fatalf("answer %q, want ok", got)
	}
	rec := sc.record(time.Now(), 0, false)
	if rec.SendStalls != 1 || rec.SendStallWait <= 0 || rec.Stream != 1 || rec.Conn != 1 || rec.DataFrames != 1 {
		t.Errorf("stream %+v: want one stall waiting for the server's window, stream 1 on connection 1, one DATA frame", *rec)
	}
}

// frameServer is an HTTP/2 server of frames alone. It answers every
// request with 200 "ok" once the request's body is in, opening the
// windows only when the body has used them up (RFC 9113's 65,535 bytes).
// With goAway its first connection answers the first request with GOAWAY
// instead (last stream 0: not taken) and closes.
func frameServer(t *testing.T, goAway bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func(first bool) { defer wg.Done(); defer c.Close(); serveFrames(c, first) }(goAway && i == 0)
		}
	}()
	return "http://" + ln.Addr().String()
}

// serveFrames speaks just enough HTTP/2 on c for frameServer.
func serveFrames(c net.Conn, goAway bool) {
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil {
		return
	}
	fr := http2.NewFramer(c, c)
	if fr.WriteSettings() != nil {
		return
	}
	received := 0
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		var end bool
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() && fr.WriteSettingsAck() != nil {
				return
			}
		case *http2.HeadersFrame:
			if goAway {
				_ = fr.WriteGoAway(0, http2.ErrCodeNo, nil)
				return
			}
			end = f.StreamEnded()
		case *http2.DataFrame:
			before := received
			received += int(f.Length)
			if before < 65535 && received >= 65535 &&
				(fr.WriteWindowUpdate(0, 1<<20) != nil || fr.WriteWindowUpdate(f.StreamID, 1<<20) != nil) {
				return
			}
			end = f.StreamEnded()
		}
		if end && answerOK(fr, f.Header().StreamID) != nil {
			return
		}
	}
}

// answerOK answers stream with 200 "ok".
func answerOK(fr *http2.Framer, stream uint32) error {
	var hb bytes.Buffer
	if err := hpack.NewEncoder(&hb).WriteField(hpack.HeaderField{Name: ":status", Value: "200"}); err != nil {
		return err
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		return err
	}
	return fr.WriteData(stream, true, []byte("ok"))
}

func TestH2SendsARequestAgainAfterAGoAwayThatDidNotTakeIt(t *testing.T) {
	url := frameServer(t, true)
	tr, err := NewH2Transport(H2Config{H2C: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	got, sc := tracedPost(t, &http.Client{Transport: tr}, url, []byte("{}"))
	if got != "ok" {
		t.Fatalf("answer %q, want ok", got)
	}
	if st := tr.Stats(); st.Connections != 2 || st.GoAwayRetries != 1 {
		t.Errorf("stats %+v: want 2 connections opened, 1 request sent again", st)
	}
	if rec := sc.record(time.Now(), 0, false); !rec.GoAwayRetry || rec.Conn != 2 {
		t.Errorf("stream %+v: want the retry, on connection 2", *rec)
	}
}
