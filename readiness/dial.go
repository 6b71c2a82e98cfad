package readiness

import (
	"context"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pollSlice is how long dialTCP's poll waits before it looks at ctx again.
const pollSlice = 50 * time.Millisecond

// dialTCP connects to ip:port, and closes the connection at once. It
// waits for the connection in a poll(2) of its own thread rather than in
// the runtime's poller: a loopback connection is made within the
// connect, and parking the goroutine until the poller wakes it cost most
// of a probe on a VM that halts its idle vCPUs (wait_for_port was 2.4–3×
// GET /health in quiet runs, figure 18). It gives up at ctx's end or
// after probeTimeout. Its errors are net.Dial's: a *net.OpError "dial"
// whose Err is the connect's error, or os.ErrDeadlineExceeded.
func dialTCP(ctx context.Context, ip net.IP, port int) error {
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
	switch err := unix.Connect(fd, sa); err {
	case nil:
		return nil
	case unix.EINPROGRESS, unix.EINTR: // the connection goes on: wait for it
	default:
		return fail(os.NewSyscallError("connect", err))
	}
	deadline := time.Now().Add(probeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	for {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fail(os.ErrDeadlineExceeded)
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, err := unix.Poll(fds, int(min(left, pollSlice)/time.Millisecond)+1)
		switch {
		case err == unix.EINTR || n == 0:
			continue
		case err != nil:
			return fail(os.NewSyscallError("poll", err))
		}
		soErr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		switch {
		case err != nil:
			return fail(os.NewSyscallError("getsockopt", err))
		case soErr != 0:
			return fail(os.NewSyscallError("connect", syscall.Errno(soErr)))
		}
		return nil
	}
}
