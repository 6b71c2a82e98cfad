package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"

	"golang.org/x/sys/unix"
)

// An Exec command asked for with ExecOptions.StdinRaw has a stdin side
// channel when the agent offers one (ExecConn.StdinID): a raw /write_stdin
// request whose body is the command's whole stdin, unframed and unmasked,
// which the agent splices into the command's pipe rather than copying
// each byte twice, as it must a WebSocket's.

// ErrStdinUnsent is wrapped by SendStdin's error when none of its reader
// was taken: the agent offered no side channel, or refused the request
// before its body. The reader is then as it was, and the command's stdin
// still open: WriteStdin can send it instead.
var ErrStdinUnsent = errors.New("exec: stdin not sent on its side channel")

// StdinID returns the id of the command's stdin side channel, or "" if
// there is none (not asked for, or an agent that does not offer it).
func (x *ExecConn) StdinID() string { return x.stdinID }

// SendStdin streams r, the command's whole stdin, through its side
// channel, and returns how many bytes the command took; r's end closes
// the command's stdin (on an error too). It returns once the command has
// taken all of r, or the command has ended. A regular file goes with its
// length (the kernel sends it, the agent splices it); a pipe, with
// WithSplicedStdin, is spliced into a connection of its own; any other
// reader is sent as it is read, in chunks of what one read gives (up to
// 1 MiB). r is not closed. Call it once, and not together with WriteStdin: the
// agent refuses stdin frames once the side channel is attached.
func (x *ExecConn) SendStdin(ctx context.Context, r io.Reader) (int64, error) {
	if x.stdinID == "" {
		return 0, fmt.Errorf("%w: the agent offered no side channel", ErrStdinUnsent)
	}
	path := "/write_stdin?" + url.Values{"id": {x.stdinID}}.Encode()
	if pipe, ok := splicePipe(r); ok && x.c.spliceStdin {
		if u, ok := x.c.directURL(path); ok {
			return x.sendSpliced(ctx, u, pipe)
		}
	}
	n, known := knownLength(r)
	var body io.Reader = http.NoBody // an empty one: no duplicate to close
	untouched := func() bool { return true }
	if !known || n > 0 {
		body, untouched = sideBody(r, known)
	}
	req, err := x.c.stdinRequest(ctx, x.stdinID, body, n, known)
	if err != nil {
		return 0, err
	}
	// The agent answers 100 Continue once the body can go in: a refusal
	// (404, 409) then comes before any of r is read.
	req.Header.Set("Expect", "100-continue")
	resp, err := x.c.do(req)
	if err != nil {
		if untouched() {
			err = fmt.Errorf("%w: %w", ErrStdinUnsent, err)
		}
		return writtenBefore(err), err
	}
	return stdinReply(resp)
}

// sideBody returns the body that sends r, whose length is known or not
// (knownLength), and a function that reports whether none of r has been
// read. A regular file goes as an *os.File, so that net/http hands it to
// the kernel (sendfile), its offset telling what was read; a duplicate of
// it, since net/http closes the body. Another reader is read through
// bigReads.
func sideBody(r io.Reader, known bool) (io.Reader, func() bool) {
	if f, ok := r.(*os.File); ok {
		if known {
			if dup := dupFile(f); dup != nil {
				at, err := f.Seek(0, io.SeekCurrent)
				return dup, func() bool {
					now, nerr := f.Seek(0, io.SeekCurrent)
					return err == nil && nerr == nil && now == at
				}
			}
		}
	}
	b := &bigReads{r: r}
	return b, func() bool { return !b.read }
}

// bigReads is a body net/http sends chunked: its WriteTo writes each read
// of r, up to sideChunk, as one chunk, where io.Copy would cut them at
// 32 KiB. A read returns what r has, so nothing waits for a chunk to fill.
type bigReads struct {
	r    io.Reader
	read bool // some of r was read
}

// sideChunk is the largest chunk bigReads sends: the pipe the agent
// splices it into holds 1 MiB.
const sideChunk = 1 << 20

func (b *bigReads) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read = b.read || n > 0
	return n, err
}

func (b *bigReads) WriteTo(w io.Writer) (int64, error) {
	buf := make([]byte, sideChunk)
	var total int64
	for {
		n, err := b.Read(buf)
		if n > 0 {
			m, werr := w.Write(buf[:n])
			total += int64(m)
			if werr != nil {
				return total, werr
			}
		}
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// dupFile returns a new *os.File on a duplicate of f's descriptor (the
// same open file, offset included), or nil if there is none.
func dupFile(f *os.File) *os.File {
	sc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	var nfd int
	var derr error = unix.EBADF
	_ = sc.Control(func(fd uintptr) { nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) })
	if derr != nil {
		return nil
	}
	return os.NewFile(uintptr(nfd), f.Name())
}
