//go:build linux

package probe

import (
	"context"
	"io"
	"net"
	"os"
	"syscall"
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
	oob []byte
	arrivalStamps
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
	return &stampedConn{Conn: c, raw: raw, oob: make([]byte, unix.CmsgSpace(timespecBytes))}
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
	var n, oobn int
	var rerr error
	err := c.raw.Read(func(fd uintptr) bool {
		for {
			n, oobn, _, _, rerr = unix.Recvmsg(int(fd), p, c.oob, 0)
			if rerr != unix.EINTR {
				return rerr != unix.EAGAIN // EAGAIN: wait for the socket to be readable
			}
		}
	})
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
	c.latest.Store(receivedAt(c.oob[:oobn]))
	return n, nil
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
