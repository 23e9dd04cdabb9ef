//go:build linux

package probe

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// stampedPair dials a loopback listener with the probe's dialer and returns
// the client's connection and the server's end.
func stampedPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err = stampingDialer(newDialer())(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	if _, ok := client.(*stampedConn); !ok {
		t.Fatalf("the dialer gave a %T, want a stampedConn", client)
	}
	return client, server
}

// waitReadable blocks until c has bytes to read.
func waitReadable(t *testing.T, c net.Conn) {
	t.Helper()
	raw, err := c.(*stampedConn).Conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var perr error
	if err := raw.Control(func(fd uintptr) {
		for {
			_, perr = unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, -1)
			if perr != unix.EINTR {
				return
			}
		}
	}); err != nil || perr != nil {
		t.Fatal(err, perr)
	}
}

// TestStampedConnArrival: a read's time is when its bytes reached the host,
// which is before the socket was seen readable, not when the read ran.
// The kernel turns receive times on for the whole host a moment after the
// first socket asks (a deferred static key), so the first reads may have
// none: then the arrival is the read's own time.
func TestStampedConnArrival(t *testing.T) {
	t.Parallel()
	client, server := stampedPair(t)
	stamped := 0
	for i := 0; stamped < 3; i++ {
		if i == 1000 {
			t.Fatalf("%d of %d reads had a receive time from the kernel", stamped, i)
		}
		written := time.Now()
		if _, err := server.Write([]byte("data: x\n\n")); err != nil {
			t.Fatal(err)
		}
		waitReadable(t, client)
		readable := time.Now()
		time.Sleep(time.Millisecond) // the read comes strictly later
		buf := make([]byte, 64)
		n, err := client.Read(buf)
		read := time.Now()
		if err != nil || string(buf[:n]) != "data: x\n\n" {
			t.Fatalf("read %d: %q, %v", i, buf[:n], err)
		}
		at := arrivalOf(client, read)
		if client.(arrivalConn).lastArrival() == 0 {
			if !at.Equal(read) {
				t.Fatalf("read %d without a receive time: arrival %v, want the read's time", i, at)
			}
			continue
		}
		stamped++
		// Wall-clock readings: the kernel's time is a wall-clock time.
		if at.UnixNano() < written.UnixNano() || at.UnixNano() > readable.UnixNano() {
			t.Fatalf("read %d: arrival %s, want between the write %s and the socket being readable %s",
				i, at.Format(time.StampMicro), written.Format(time.StampMicro), readable.Format(time.StampMicro))
		}
		if !at.Before(read) {
			t.Fatalf("read %d: arrival %s is not before the read %s", i, at.Format(time.StampMicro), read.Format(time.StampMicro))
		}
	}
}

// TestStampedConnErrors: the end of the stream, a closed connection and a
// deadline read as they do on a net.TCPConn.
func TestStampedConnErrors(t *testing.T) {
	t.Parallel()
	client, server := stampedPair(t)
	if err := client.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err := client.Read(make([]byte, 8))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want a timeout", err)
	}
	if err := client.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if n, err := client.Read(nil); n != 0 || err != nil {
		t.Fatalf("empty read: %d, %v", n, err)
	}
	server.Close()
	if _, err := client.Read(make([]byte, 8)); err != io.EOF {
		t.Fatalf("read after the peer closed: %v, want io.EOF", err)
	}
	client.Close()
	if _, err := client.Read(make([]byte, 8)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after close: %v, want net.ErrClosed", err)
	}
}

// TestArrivalOfFallsBack: without a kernel time the arrival is the read's
// own time; a kernel time too old to be true (the wall clock stepped) is not used.
func TestArrivalOfFallsBack(t *testing.T) {
	t.Parallel()
	now := time.Now()
	if got := arrivalOf(nil, now); !got.Equal(now) {
		t.Fatalf("no connection: %v, want now", got)
	}
	var s stampedConn
	if got := arrivalOf(&s, now); !got.Equal(now) {
		t.Fatalf("no receive time: %v, want now", got)
	}
	s.latest.Store(now.Add(-time.Hour).UnixNano())
	if got := arrivalOf(&s, now); !got.Equal(now) {
		t.Fatalf("a receive time an hour old: %v, want now", got)
	}
	s.latest.Store(now.Add(time.Second).UnixNano())
	if got := arrivalOf(&s, now); !got.Equal(now) {
		t.Fatalf("a receive time in the future: %v, want now", got)
	}
	s.latest.Store(now.Add(-3 * time.Millisecond).UnixNano())
	if got := now.Sub(arrivalOf(&s, now)); got != 3*time.Millisecond {
		t.Fatalf("a receive time 3 ms before: arrival %v before now", got)
	}
}

// TestStampedConnReadAllocatesNothing: a read costs the probe no garbage,
// as net.TCPConn's does not.
func TestStampedConnReadAllocatesNothing(t *testing.T) {
	client, server := stampedPair(t)
	msg, buf := []byte("data: x\n\n"), make([]byte, 64)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := server.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(client, buf[:len(msg)]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Fatalf("%.1f allocations per write and read, want none", allocs)
	}
}

// TestKernelRTT: the kernel's round trip on a new connection lies within
// the dial that made it (its handshake is in the dial), whatever the
// scheduler did around it; a connection not the probe's says nothing.
func TestKernelRTT(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			io.Copy(io.Discard, c)
		}
	}()
	began := time.Now()
	c, err := stampingDialer(newDialer())(t.Context(), "tcp", ln.Addr().String())
	dialed := time.Since(began)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rtt, ok := kernelRTT(c)
	if !ok || rtt <= 0 || rtt > dialed {
		t.Fatalf("kernel RTT %v (%t), want one within the dial's %v", rtt, ok, dialed)
	}
	if _, ok := kernelRTT(c.(*stampedConn).Conn); ok {
		t.Fatal("a plain connection gave a kernel RTT")
	}
}
