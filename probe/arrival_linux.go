//go:build linux

package probe

import (
	"context"
	"io"
	"net"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// stampedConn reads a TCP connection with recvmsg, taking the kernel's
// receive time (SO_TIMESTAMPNS) of each read's bytes. It embeds net.Conn,
// not *net.TCPConn, so that nothing reads the socket around Read (the
// TCPConn's WriteTo would, for io.Copy) and leaves the latest time stale.
type stampedConn struct {
	net.Conn
	raw syscall.RawConn
	arrivalStamps

	// One read's message header, results, and recv bound to them once, so
	// that a read allocates nothing (a closure per read would escape, and
	// so would unix.Recvmsg's address). Reads of one connection are not
	// concurrent.
	msg  unix.Msghdr
	iov  unix.Iovec
	oob  []byte
	n    int
	err  error
	recv func(fd uintptr) bool
}

// timespecBytes is the size of the kernel's struct timespec on this
// platform, the payload of an SCM_TIMESTAMPNS message.
const timespecBytes = int(unsafe.Sizeof(unix.Timespec{}))

// stampArrivals returns c reading with receive times where it is TCP and
// the kernel takes SO_TIMESTAMPNS, else c itself.
func stampArrivals(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	}); err != nil || serr != nil {
		return c
	}
	sc := &stampedConn{Conn: c, raw: raw, oob: make([]byte, unix.CmsgSpace(timespecBytes))}
	sc.recv = sc.recvmsg
	return sc
}

// stampingDialer dials with d and stamps the connections' arrivals.
func stampingDialer(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return stampArrivals(c), nil
	}
}

func (c *stampedConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.iov.Base = &p[0]
	c.iov.SetLen(len(p))
	err := c.raw.Read(c.recv)
	n, rerr := c.n, c.err
	c.iov.Base, c.err = nil, nil // keep no hold on p
	if err == nil && rerr != nil {
		err = os.NewSyscallError("recvmsg", rerr)
	}
	if err != nil {
		// As net.TCPConn says it: closed (net.ErrClosed) and deadline
		// (a timeout) errors keep their identity inside.
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
	}
	if n == 0 {
		return 0, io.EOF
	}
	c.latest.Store(receivedAt(c.oob[:c.msg.Controllen]))
	return n, nil
}

// recvmsg is one attempt at a read, for raw.Read: false (wait until the
// socket is readable) when there is nothing to read yet.
func (c *stampedConn) recvmsg(fd uintptr) bool {
	for {
		c.msg.Iov = &c.iov
		c.msg.SetIovlen(1)
		c.msg.Control = &c.oob[0]
		c.msg.SetControllen(len(c.oob))
		n, _, errno := unix.Syscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&c.msg)), 0)
		switch errno {
		case 0:
			c.n, c.err = int(n), nil
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		c.n, c.err = 0, errno
		return true
	}
}

// receivedAt is the SCM_TIMESTAMPNS time in a read's control messages, in
// Unix nanoseconds; 0 when there is none.
func receivedAt(oob []byte) int64 {
	for len(oob) > 0 {
		h, data, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			return 0
		}
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPNS && len(data) >= timespecBytes {
			ts := (*unix.Timespec)(unsafe.Pointer(&data[0]))
			return ts.Nano()
		}
		oob = rest
	}
	return 0
}

// kernelRTT is the lowest round trip the kernel has measured on c, the
// probe's own connection: the handshake's and every acknowledgement's
// since (TCP_INFO's min_rtt, else its smoothed rtt). Unlike the connect
// time the client times around the dial, no goroutine's scheduling is in
// it. false where c is not the probe's or the kernel says nothing.
func kernelRTT(c net.Conn) (time.Duration, bool) {
	sc, ok := c.(*stampedConn)
	if !ok {
		return 0, false
	}
	var info *unix.TCPInfo
	var ierr error
	if err := sc.raw.Control(func(fd uintptr) {
		info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || ierr != nil {
		return 0, false
	}
	us := info.Min_rtt
	if us == 0 {
		us = info.Rtt
	}
	return time.Duration(us) * time.Microsecond, us > 0
}
