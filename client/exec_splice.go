package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// WithSplicedStdin lets ExecConn.SendStdin send a pipe (a program's
// standard input, say) on a connection of its own, dialed straight to the
// agent, with each chunk of the body spliced from the pipe into the socket
// by the kernel: net/http would copy every byte into the program and out
// again, which made `sandbox-executor exec -i` from a pipe run at 0.65× of
// a raw /write_stdin body (figure 17). It applies only where the
// http.Client adds nothing such a connection would miss: a plain http://
// URL with no proxy set for it. Elsewhere, and for any other reader,
// SendStdin goes through the http.Client as without it.
func WithSplicedStdin() Option {
	return func(c *Client) { c.spliceStdin = true }
}

// splicePipe returns r as a pipe SendStdin may splice from, if it is one.
func splicePipe(r io.Reader) (*os.File, bool) {
	f, ok := r.(*os.File)
	if !ok {
		return nil, false
	}
	fi, err := f.Stat()
	return f, err == nil && fi.Mode()&os.ModeNamedPipe != 0
}

// directURL returns the URL of the request a spliced body goes in: the
// agent's URL with path and query added, if it is plain http with no
// proxy for it.
func (c *Client) directURL(pathAndQuery string) (*url.URL, bool) {
	u, err := url.Parse(c.base + pathAndQuery)
	if err != nil || u.Scheme != "http" {
		return nil, false
	}
	if p, err := http.ProxyFromEnvironment(&http.Request{URL: u}); err != nil || p != nil {
		return nil, false
	}
	return u, true
}

// sendSpliced is SendStdin of pipe on a connection of its own to u: a
// chunked POST that asks for 100 Continue (so that a refusal comes before
// any of pipe is read), then, each time the pipe has data, a chunk header
// for what it holds, that much spliced from the pipe into the socket, and
// the chunk's end. The pipe's end ends the body.
func (x *ExecConn) sendSpliced(ctx context.Context, u *url.URL, pipe *os.File) (int64, error) {
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "80")
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrStdinUnsent, &ConnError{URL: x.c.base, Err: err})
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() }) // unblocks every read and write below
	defer stop()
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return 0, fmt.Errorf("%w: not a TCP connection", ErrStdinUnsent)
	}
	head := "POST " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\n" +
		"Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n" +
		"Expect: 100-continue\r\nConnection: close\r\n"
	if x.c.token != "" {
		head += "Authorization: Bearer " + x.c.token + "\r\n"
	}
	br := bufio.NewReader(conn)
	if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrStdinUnsent, x.ctxOr(ctx, err))
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrStdinUnsent, x.ctxOr(ctx, err))
	}
	if resp.StatusCode != http.StatusContinue { // answered before the body: none of pipe was read
		n, err := stdinReply(resp)
		if err != nil {
			err = fmt.Errorf("%w: %w", ErrStdinUnsent, err)
		}
		return n, err
	}
	if err := spliceBody(ctx, tc, pipe); err != nil {
		// The agent may have answered and closed (the command ended):
		// its reply says how much the command took. Half-closing first
		// ends the body, cut, for an agent still waiting for it, which
		// then answers too rather than wait.
		_ = tc.CloseWrite()
		if resp, rerr := http.ReadResponse(br, nil); rerr == nil {
			return stdinReply(resp)
		}
		return 0, x.ctxOr(ctx, err)
	}
	if resp, err = http.ReadResponse(br, nil); err != nil {
		return 0, x.ctxOr(ctx, err)
	}
	return stdinReply(resp)
}

// ctxOr returns ctx's error if it has ended (which closed the
// connection), else err as a ConnError.
func (x *ExecConn) ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return &ConnError{URL: x.c.base, Err: err}
}

// pipePoll is how long a wait for the pipe lasts before ctx is looked at.
const pipePoll = 100 * time.Millisecond

// spliceBody sends pipe, to its end, as the chunks of a chunked body on
// tc, and the last chunk. The pipe is waited for in poll(2), from this
// goroutine's thread (a program's standard input need not be pollable by
// the runtime), and its mode is left as it is: a chunk is only what the
// pipe already holds, so no splice from it waits.
func spliceBody(ctx context.Context, tc *net.TCPConn, pipe *os.File) error {
	rc, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	prc, err := pipe.SyscallConn()
	if err != nil {
		return err
	}
	fd := -1
	if err := prc.Control(func(p uintptr) { fd = int(p) }); err != nil {
		return err
	}
	// fd stays pipe's while SendStdin runs: its caller does not close it.
	for {
		n, err := pipeData(ctx, fd)
		if err != nil {
			return err
		}
		if n == 0 { // the pipe's end
			_, err := io.WriteString(tc, "0\r\n\r\n")
			return err
		}
		n = min(n, sideChunk)
		if _, err := io.WriteString(tc, strconv.FormatInt(int64(n), 16)+"\r\n"); err != nil {
			return err
		}
		left := n
		var serr error
		werr := rc.Write(func(sock uintptr) bool {
			for left > 0 {
				k, err := unix.Splice(fd, nil, int(sock), nil, left, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
				switch {
				case err == unix.EINTR:
					continue
				case err == unix.EAGAIN: // the socket is full: wait until it is not
					return false
				case err != nil:
					serr = os.NewSyscallError("splice", err)
					return true
				case k == 0:
					serr = io.ErrUnexpectedEOF // the pipe gave less than it held
					return true
				}
				left -= int(k)
			}
			return true
		})
		if err := errors.Join(werr, serr); err != nil {
			return err
		}
		if _, err := io.WriteString(tc, "\r\n"); err != nil {
			return err
		}
	}
}

// pipeData waits until the pipe fd has data, and returns how many bytes
// it holds, or 0 at its end (no writer left, nothing in it).
func pipeData(ctx context.Context, fd int) (int, error) {
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(pipePoll/time.Millisecond))
		if err == unix.EINTR || (err == nil && n == 0) {
			continue
		}
		if err != nil {
			return 0, os.NewSyscallError("poll", err)
		}
		avail, err := unix.IoctlGetInt(fd, unix.TIOCINQ) // FIONREAD
		if err != nil {
			return 0, os.NewSyscallError("ioctl", err)
		}
		if avail > 0 || fds[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0 {
			return avail, nil
		}
	}
}
