package executor

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// spliceSource is a socket WriteStdin can move bytes from with splice(2),
// straight into the stdin pipe, without copying them through the agent's
// memory: a *net.TCPConn.
type spliceSource interface {
	syscall.Conn
	SetReadDeadline(t time.Time) error
}

// splice moves lr.N bytes from the socket src into the pipe; handled is
// false, and nothing was moved, if the system cannot splice from src.
//
// A socket splices straight into the pipe, so nothing is ever held in
// between: whatever left the socket is in the pipe. Both ends are
// non-blocking; when a splice finds nothing to move, the writer waits for
// whichever end was in the way, in the runtime's poller, under that end's
// deadline: the socket's read deadline, the pipe's write deadline. With a
// stall time both are re-armed at each progress, so a client that sends
// nothing for that long ends the write with os.ErrDeadlineExceeded (a
// read error), and a command that reads nothing with ErrStdinStalled.
func (w *stdinWriter) splice(src spliceSource, lr *io.LimitedReader) (written int64, handled bool, err error) {
	sc, err := src.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	pc, err := w.s.f.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	w.s.mu.Lock()
	w.source = src
	w.s.mu.Unlock()
	for lr.N > 0 {
		if err := w.arm(); err != nil {
			return written, true, err
		}
		n, err := w.spliceSome(sc, pc, int(min(lr.N, stdinPipeSize)))
		written += int64(n)
		lr.N -= int64(n)
		if err != nil {
			if written == 0 && errors.Is(err, syscall.EINVAL) {
				return 0, false, nil // not a socket splice can read: copy instead
			}
			return written, true, err
		}
	}
	return written, true, nil
}

// spliceSome moves at least one and at most max bytes from the socket to
// the pipe, waiting as splice describes.
func (w *stdinWriter) spliceSome(sc, pc syscall.RawConn, max int) (int, error) {
	var n int
	var serr error
	sockEmpty := false // which end the last EAGAIN was for
	for {
		var err error
		if sockEmpty {
			// Wait for the socket; the pipe is used only inside the
			// callback, under its own reference (Control).
			err = sc.Read(func(sfd uintptr) bool {
				if cerr := pc.Control(func(pfd uintptr) { n, sockEmpty, serr = spliceOnce(sfd, pfd, max) }); cerr != nil {
					serr = cerr
					return true
				}
				return !(serr == unix.EAGAIN && sockEmpty)
			})
			if err != nil {
				return 0, w.waitError(err, false)
			}
		} else {
			err = pc.Write(func(pfd uintptr) bool {
				if cerr := sc.Control(func(sfd uintptr) { n, sockEmpty, serr = spliceOnce(sfd, pfd, max) }); cerr != nil {
					serr = cerr
					return true
				}
				return !(serr == unix.EAGAIN && !sockEmpty)
			})
			if err != nil {
				return 0, w.waitError(err, true)
			}
		}
		switch {
		case serr == unix.EAGAIN:
			continue // the other end was in the way: wait for it
		case serr == unix.EPIPE:
			return 0, fmt.Errorf("%w: the process closed it or exited", ErrStdinClosed)
		case serr != nil:
			if w.s.isEnded() {
				return 0, errEnded // the pipe was closed under Control
			}
			return 0, os.NewSyscallError("splice", serr)
		case n == 0:
			return 0, io.ErrUnexpectedEOF // the client closed the socket early
		}
		return n, nil
	}
}

// spliceOnce moves up to max bytes from the socket sfd to the pipe pfd
// without waiting. sockEmpty says whether the socket had nothing queued
// just before the splice: then an EAGAIN may be the socket's, and the
// writer waits for it to be readable (data that comes meanwhile wakes it).
// Otherwise, since only the writer takes from the socket, the data was
// there for the splice, and an EAGAIN is the pipe's: it is full. (Looking
// after the splice would be wrong: data can reach the socket's queue
// during it, too late for it, and the pipe would be waited for in vain.)
func spliceOnce(sfd, pfd uintptr, max int) (n int, sockEmpty bool, err error) {
	queued, qerr := unix.IoctlGetInt(int(sfd), unix.SIOCINQ)
	sockEmpty = qerr != nil || queued == 0
	for {
		var m int64
		m, err = unix.Splice(int(sfd), nil, int(pfd), nil, max, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
		if err != unix.EINTR {
			return int(m), sockEmpty, err
		}
	}
}

// waitError is the writer's error for err, a failed wait on the pipe
// (onPipe) or on the socket.
func (w *stdinWriter) waitError(err error, onPipe bool) error {
	if stopped := w.stoppedBy(); stopped != nil {
		return stopped
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		if onPipe {
			return ErrStdinStalled
		}
		return err // the client sent nothing for the stall time
	}
	if onPipe {
		return w.pipeError(err)
	}
	return err
}
