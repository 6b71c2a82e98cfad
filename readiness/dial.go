package readiness

import (
	"context"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// pollSlice is how long dialTCP's poll waits before it looks at ctx again.
const pollSlice = 50 * time.Millisecond

// dialTCP connects to ip:port, and closes the connection at once. A
// loopback connection is made, or refused, within the connect(2), so it
// asks again at once, which answers as poll(2) and SO_ERROR would, in one
// call; only a connection still going on is waited for, in a poll(2) of
// its own thread rather than in the runtime's poller: parking the
// goroutine until the poller woke it cost most of a probe on a VM that
// halts its idle vCPUs (wait_for_port was 2.4–3× GET /health in quiet
// runs, figure 18). It gives up at ctx's end or at deadline. Its errors are net.Dial's: a *net.OpError "dial" whose Err is
// the connect's error, or os.ErrDeadlineExceeded.
func dialTCP(ctx context.Context, deadline time.Time, ip net.IP, port int) error {
	addr := &net.TCPAddr{IP: ip, Port: port}
	fail := func(err error) error { return &net.OpError{Op: "dial", Net: "tcp", Addr: addr, Err: err} }
	var sa unix.Sockaddr
	family := unix.AF_INET6
	if ip4 := ip.To4(); ip4 != nil {
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: port, Addr: [4]byte(ip4)}
	} else {
		sa = &unix.SockaddrInet6{Port: port, Addr: [16]byte(ip.To16())}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail(os.NewSyscallError("socket", err))
	}
	defer unix.Close(fd)
	err = unix.Connect(fd, sa)
	for {
		switch err {
		case nil, unix.EISCONN:
			return nil
		case unix.EINPROGRESS, unix.EINTR:
			// The connection goes on, but a loopback one is made (or
			// refused) within the call: asking again says which.
		case unix.EALREADY: // still going on: wait until it is made
			if err := waitWritable(ctx, fd, deadline); err != nil {
				return fail(err)
			}
		default:
			return fail(os.NewSyscallError("connect", err))
		}
		err = unix.Connect(fd, sa)
	}
}

// waitWritable waits in poll(2) until fd is writable (its connect has
// ended, made or not), ctx ends, or deadline passes.
func waitWritable(ctx context.Context, fd int, deadline time.Time) error {
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return os.ErrDeadlineExceeded
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, err := unix.Poll(fds, int(min(left, pollSlice)/time.Millisecond)+1)
		switch {
		case err == unix.EINTR || n == 0:
		case err != nil:
			return os.NewSyscallError("poll", err)
		default:
			return nil
		}
	}
}
