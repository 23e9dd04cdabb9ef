package probe

import (
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// The HTTP/2 frames of one connection, as they pass. net/http's HTTP/2
// client says nothing of its frames, so the probe reads their headers
// where they cross the connection (above TLS): which stream a request
// went out on, when its response headers and each of its DATA frames
// arrived, and the flow-control windows both ways, from which it counts
// the times a stream waited for a WINDOW_UPDATE. It parses 9-byte frame
// headers and the few bytes of the control frames it needs; it never
// changes a byte.

// HTTP/2 frame types and flags (RFC 9113, section 6).
const (
	frameData         = 0x0
	frameHeaders      = 0x1
	frameRSTStream    = 0x3
	frameSettings     = 0x4
	frameGoAway       = 0x7
	frameWindowUpdate = 0x8

	flagEndStream = 0x1
	flagACK       = 0x1 // SETTINGS

	settingInitialWindowSize = 0x4

	h2DefaultWindow  = 65535
	h2FrameHeaderLen = 9
	// h2ClientPreface is the length of the connection preface the client
	// writes before its first frame.
	h2ClientPreface = 24
	// h2KeptPayload is how much of a frame's payload the scanner keeps:
	// enough for a WINDOW_UPDATE, a GOAWAY's last stream id, an
	// RST_STREAM and ten SETTINGS.
	h2KeptPayload = 64
	// h2MaxTracked bounds the streams one connection tracks at once; a
	// server's concurrent-stream limit is far below it.
	h2MaxTracked = 1 << 14
)

// frameHeader is an HTTP/2 frame's header.
type frameHeader struct {
	length uint32
	typ    byte
	flags  byte
	stream uint32
}

// frameScanner follows the frames of one direction of a connection
// through the bytes as they pass, in whatever pieces they come.
type frameScanner struct {
	skip    int // preface bytes still to pass over
	hdr     [h2FrameHeaderLen]byte
	hn      int  // header bytes gathered
	inFrame bool // the header is complete; payload bytes follow
	cur     frameHeader
	remain  uint32 // payload bytes still to come
	kept    [h2KeptPayload]byte
	kn      int // payload bytes kept
}

// next consumes p up to the end of the next complete frame, or all of it.
// It returns how many bytes it consumed and, when a frame ended there, its
// header and the start of its payload (valid until the next call).
func (s *frameScanner) next(p []byte) (n int, fr frameHeader, payload []byte, ok bool) {
	if s.skip > 0 {
		n = min(s.skip, len(p))
		s.skip -= n
		return n, fr, nil, false
	}
	if !s.inFrame {
		c := copy(s.hdr[s.hn:], p)
		s.hn += c
		n = c
		if s.hn < h2FrameHeaderLen {
			return n, fr, nil, false
		}
		s.cur = frameHeader{
			length: uint32(s.hdr[0])<<16 | uint32(s.hdr[1])<<8 | uint32(s.hdr[2]),
			typ:    s.hdr[3], flags: s.hdr[4],
			stream: binary.BigEndian.Uint32(s.hdr[5:9]) & 0x7fffffff,
		}
		s.hn, s.inFrame, s.remain, s.kn = 0, true, s.cur.length, 0
		p = p[c:]
	}
	take := min(uint32(len(p)), s.remain)
	if s.kn < h2KeptPayload {
		s.kn += copy(s.kept[s.kn:], p[:take])
	}
	s.remain -= take
	n += int(take)
	if s.remain > 0 {
		return n, fr, nil, false
	}
	s.inFrame = false
	return n, s.cur, s.kept[:s.kn], true
}

// h2Stream is what the frames said of one stream. Its fields are the
// connection's to write, under its lock; latest is read without it.
type h2Stream struct {
	id        uint32
	wrote     time.Time // the request's last frame (END_STREAM) written
	headers   time.Time // the response's HEADERS frame arrived
	firstData time.Time
	lastData  time.Time
	frames    int // DATA frames
	maxGap    time.Duration
	latest    atomic.Int64 // the latest frame's arrival, Unix ns

	// The windows: sendWin is how much more the client may send on the
	// stream, recvWin how much more the server may.
	sendWin, recvWin       int64
	sendFrom, recvFrom     time.Time // a stall's start; zero: none
	sendStalls, recvStalls int
	sendWait, recvWait     time.Duration
}

// sniffConn is an HTTP/2 connection whose frames the probe reads as they
// pass (see above). Reads come from the client's one read loop and writes
// under its write lock, so each direction's scanner has one user; the
// stream table and the windows, which both directions change, are behind
// mu.
type sniffConn struct {
	net.Conn          // what the frames travel on: TLS or TCP
	raw      net.Conn // the TCP-level connection, for its receive times
	serial   int      // which of the transport's connections, from 1

	rd, wr frameScanner // reads: the server's frames; writes: the client's

	latest atomic.Int64 // the latest read's arrival, Unix ns

	mu          sync.Mutex
	streams     map[uint32]*h2Stream
	lastHeaders *h2Stream // the stream of the latest HEADERS frame written
	// Initial stream windows: the server's SETTINGS set the client's
	// (sendInit), the client's set the server's (recvInit).
	sendInit, recvInit int64
	sendConn, recvConn int64 // the connection's windows
	stalledSend        int   // streams waiting for the server's window
	stalledRecv        int   // streams the server may be waiting on
	goAway             bool
	goAwayLast         uint32
	ended              []*h2Stream // the streams the write under way ends
}

func newSniffConn(c, raw net.Conn, serial int) *sniffConn {
	s := &sniffConn{
		Conn: c, raw: raw, serial: serial,
		streams:  make(map[uint32]*h2Stream),
		sendInit: h2DefaultWindow, recvInit: h2DefaultWindow,
		sendConn: h2DefaultWindow, recvConn: h2DefaultWindow,
	}
	s.wr.skip = h2ClientPreface
	return s
}

// lastArrival is the kernel's receive time of the latest read's bytes
// (see arrivalConn).
func (s *sniffConn) lastArrival() int64 { return s.latest.Load() }

func (s *sniffConn) Read(p []byte) (int, error) {
	n, err := s.Conn.Read(p)
	if n > 0 {
		at := arrivalOf(s.raw, time.Now())
		s.latest.Store(at.UnixNano())
		s.mu.Lock()
		for b := p[:n]; len(b) > 0; {
			used, fr, payload, ok := s.rd.next(b)
			b = b[used:]
			if ok {
				s.serverFrame(fr, payload, at)
			}
		}
		s.mu.Unlock()
	}
	return n, err
}

// Write takes the client's frames into account before they leave, so that
// the server's answer to them (a WINDOW_UPDATE) can never be counted
// first, then writes them; the requests they end are stamped written once
// the write returns.
func (s *sniffConn) Write(p []byte) (int, error) {
	now := time.Now()
	s.mu.Lock()
	s.ended = s.ended[:0]
	for b := p; len(b) > 0; {
		used, fr, payload, ok := s.wr.next(b)
		b = b[used:]
		if ok {
			s.clientFrame(fr, payload, now)
		}
	}
	s.mu.Unlock()
	n, err := s.Conn.Write(p)
	if err == nil {
		now = time.Now()
		s.mu.Lock()
		for _, st := range s.ended {
			st.wrote = now
		}
		s.mu.Unlock()
	}
	return n, err
}

// serverFrame takes a frame the server sent, which arrived at at.
func (s *sniffConn) serverFrame(fr frameHeader, payload []byte, at time.Time) {
	st := s.streams[fr.stream]
	switch fr.typ {
	case frameData:
		s.serverData(st, fr, at)
	case frameHeaders:
		if st != nil && st.headers.IsZero() {
			st.headers = at
		}
		if st != nil {
			st.latest.Store(at.UnixNano())
		}
	case frameWindowUpdate:
		s.windowUpdate(fr.stream, payload, at, true)
	case frameSettings:
		if fr.flags&flagACK == 0 {
			s.settings(payload, true)
		}
	case frameGoAway:
		s.goAway = true
		if len(payload) >= 4 {
			s.goAwayLast = binary.BigEndian.Uint32(payload) & 0x7fffffff
		}
	}
	if st != nil && (fr.typ == frameRSTStream || fr.flags&flagEndStream != 0 && (fr.typ == frameData || fr.typ == frameHeaders)) {
		s.forget(st, at)
	}
}

// serverData takes a DATA frame of st (nil: not tracked) that arrived at
// at: the windows it used, and the stall it starts when it used them up
// before the stream's end.
func (s *sniffConn) serverData(st *h2Stream, fr frameHeader, at time.Time) {
	s.recvConn -= int64(fr.length)
	if st == nil {
		return
	}
	st.dataFrame(at)
	st.recvWin -= int64(fr.length)
	if fr.flags&flagEndStream == 0 && st.recvFrom.IsZero() && min(st.recvWin, s.recvConn) <= 0 {
		st.recvFrom = at
		st.recvStalls++
		s.stalledRecv++
	}
}

// clientFrame takes a frame the client wrote at now.
func (s *sniffConn) clientFrame(fr frameHeader, payload []byte, now time.Time) {
	st := s.streams[fr.stream]
	switch fr.typ {
	case frameHeaders:
		if st == nil && len(s.streams) < h2MaxTracked {
			st = &h2Stream{id: fr.stream, sendWin: s.sendInit, recvWin: s.recvInit}
			s.streams[fr.stream] = st
		}
		s.lastHeaders = st // kept here too: a fast answer may end the stream before it is claimed
	case frameData:
		if st != nil {
			st.sendWin -= int64(fr.length)
		}
		s.sendConn -= int64(fr.length)
		if st != nil && fr.flags&flagEndStream == 0 && st.sendFrom.IsZero() && min(st.sendWin, s.sendConn) <= 0 {
			st.sendFrom = now
			st.sendStalls++
			s.stalledSend++
		}
	case frameWindowUpdate:
		s.windowUpdate(fr.stream, payload, now, false)
	case frameSettings:
		if fr.flags&flagACK == 0 {
			s.settings(payload, false)
		}
	case frameRSTStream:
		if st != nil {
			s.forget(st, now)
		}
	}
	if st != nil && fr.flags&flagEndStream != 0 && (fr.typ == frameHeaders || fr.typ == frameData) {
		st.wrote = now
		s.ended = append(s.ended, st)
	}
}

// dataFrame notes a DATA frame that arrived at at.
func (st *h2Stream) dataFrame(at time.Time) {
	if st.frames == 0 {
		st.firstData = at
	} else if gap := at.Sub(st.lastData); gap > st.maxGap {
		st.maxGap = gap
	}
	st.frames++
	st.lastData = at
	st.latest.Store(at.UnixNano())
}

// windowUpdate applies a WINDOW_UPDATE the server sent (fromServer: it
// opens the client's windows) or the client sent, at at, and ends the
// stalls it ends.
func (s *sniffConn) windowUpdate(stream uint32, payload []byte, at time.Time, fromServer bool) {
	if len(payload) < 4 {
		return
	}
	inc := int64(binary.BigEndian.Uint32(payload) & 0x7fffffff)
	switch {
	case stream == 0 && fromServer:
		s.sendConn += inc
	case stream == 0:
		s.recvConn += inc
	default:
		st := s.streams[stream]
		if st == nil {
			return
		}
		if fromServer {
			st.sendWin += inc
		} else {
			st.recvWin += inc
		}
		s.endStalls(st, at)
		return
	}
	if fromServer && s.stalledSend > 0 || !fromServer && s.stalledRecv > 0 {
		for _, st := range s.streams {
			s.endStalls(st, at)
		}
	}
}

// settings applies a SETTINGS frame's initial window size: the server's
// sets the client's stream windows, the client's the server's, and a
// change moves the open streams' windows by as much (RFC 9113, 6.9.2).
func (s *sniffConn) settings(payload []byte, fromServer bool) {
	for ; len(payload) >= 6; payload = payload[6:] {
		if binary.BigEndian.Uint16(payload) != settingInitialWindowSize {
			continue
		}
		v := int64(binary.BigEndian.Uint32(payload[2:]))
		if fromServer {
			delta := v - s.sendInit
			s.sendInit = v
			for _, st := range s.streams {
				st.sendWin += delta
			}
		} else {
			delta := v - s.recvInit
			s.recvInit = v
			for _, st := range s.streams {
				st.recvWin += delta
			}
		}
	}
}

// endStalls ends st's stalls whose windows are open again at at.
func (s *sniffConn) endStalls(st *h2Stream, at time.Time) {
	if !st.sendFrom.IsZero() && min(st.sendWin, s.sendConn) > 0 {
		st.sendWait += max(at.Sub(st.sendFrom), 0)
		st.sendFrom = time.Time{}
		s.stalledSend--
	}
	if !st.recvFrom.IsZero() && min(st.recvWin, s.recvConn) > 0 {
		st.recvWait += max(at.Sub(st.recvFrom), 0)
		st.recvFrom = time.Time{}
		s.stalledRecv--
	}
}

// forget drops an ended stream from the table, closing its stalls at at.
func (s *sniffConn) forget(st *h2Stream, at time.Time) {
	if !st.sendFrom.IsZero() {
		st.sendWait += max(at.Sub(st.sendFrom), 0)
		st.sendFrom = time.Time{}
		s.stalledSend--
	}
	if !st.recvFrom.IsZero() {
		st.recvWait += max(at.Sub(st.recvFrom), 0)
		st.recvFrom = time.Time{}
		s.stalledRecv--
	}
	delete(s.streams, st.id)
}

// claimLatest returns the stream of the latest HEADERS frame written: the
// caller's, when it asks right after its headers went out (net/http
// writes a request's headers and reports them written under one lock).
func (s *sniffConn) claimLatest() *h2Stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastHeaders
}

// wroteAll returns when st's request was written whole (its END_STREAM
// frame), zero when it was not.
func (s *sniffConn) wroteAll(st *h2Stream) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return st.wrote
}

// goingAway reports whether the server sent GOAWAY, and the last stream it
// said it would process.
func (s *sniffConn) goingAway() (bool, uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.goAway, s.goAwayLast
}

// snapshot copies st's figures under the connection's lock.
func (s *sniffConn) snapshot(st *h2Stream) h2Figures {
	s.mu.Lock()
	defer s.mu.Unlock()
	return h2Figures{
		id: st.id, headers: st.headers, firstData: st.firstData, frames: st.frames, maxGap: st.maxGap,
		sendStalls: st.sendStalls, recvStalls: st.recvStalls, sendWait: st.sendWait, recvWait: st.recvWait,
	}
}

// h2Figures is a consistent copy of a stream's figures.
type h2Figures struct {
	id                     uint32
	headers, firstData     time.Time
	frames                 int
	maxGap                 time.Duration
	sendStalls, recvStalls int
	sendWait, recvWait     time.Duration
}
