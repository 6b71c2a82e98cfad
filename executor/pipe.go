package executor

import (
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// consumeFunc takes what a pipeReader read: b holds the bytes not used so
// far, t is when the read returned. It returns how many bytes it used; the
// rest stays at the front of the buffer for the next call. It must use at
// least enough to leave room for another read of readSize bytes, and all
// of b when eof is set (the last call).
type consumeFunc = func(b []byte, t time.Time, eof bool) int

// readSize is how much a pipeReader asks for beyond room for one maximal
// line; it matches the default pipe capacity, so one read can empty a pipe.
const readSize = 64 << 10

// pipeReader reads one of a command's pipes to the end and hands what it
// reads to consume.
//
// The end is EOF: the shell and every child holding the pipe have closed
// it. A background child can hold it open forever (`sleep 100 &`, `yes &`),
// so once the shell has exited the reader also stops on a drain clock: the
// wall time since the exit, less the time consume took while delivering
// output the command wrote before it exited (the backlog). Once the clock
// passes drainDelay, the reader stops as soon as the backlog is all read,
// cutting what background children write from then on; it reports the
// output as truncated if they were still writing (bytes left in the pipe,
// or found by the last read), not if they were silent. What was written
// before the exit is therefore always delivered, however slowly consume
// takes it (a slow /run_streaming client) or however late the reader is
// scheduled (a loaded machine); a reader never waits on an empty pipe for
// more than drainDelay after the exit; and a child that writes forever
// (`yes &`) holds it for about drainDelay more than its backlog takes.
type pipeReader struct {
	f          *os.File
	bufs       buffers
	consume    consumeFunc
	drainDelay time.Duration

	exit atomic.Pointer[time.Time] // when the shell exited; set once, by Process.wait

	// truncated is set by run before it sends on done: it stopped while
	// background children were still writing. Readers of it wait for done.
	truncated bool
}

// drainClock is a pipeReader's view of the drain, kept by run.
type drainClock struct {
	exit time.Time // when the shell exited; zero until run has seen it
	// backlog is how many bytes run must have read before it may stop:
	// what it had read when it saw the exit, plus what the pipe held then.
	// Only run takes from the pipe, so every byte written before the exit
	// is in one or the other. (Measured by Process.wait instead, a read
	// that has emptied the pipe but not yet been counted would be missed.)
	backlog int64
	// excluded is the time consume took after the exit while delivering
	// the backlog: it is not on the drain clock.
	excluded time.Duration
}

// exited tells the reader that the shell has exited, and wakes it if it is
// waiting on an empty pipe so that it starts its drain clock. It is called
// once, by Process.wait, while run may be reading.
func (pr *pipeReader) exited(at time.Time) {
	pr.exit.Store(&at)
	_ = pr.f.SetReadDeadline(time.Now()) // from here on run keeps its own deadline
}

// run reads until EOF, a read error or the drain clock says stop; see
// pipeReader. At the end, what consume left is handed over with eof set.
//
// run runs in its own goroutine, one per pipe, owned by Process.wait,
// which closes f after run has sent on done.
func (pr *pipeReader) run(done chan<- struct{}) {
	defer func() { done <- struct{}{} }()
	var buf []byte // nil while nothing is pending: see read
	defer func() {
		if buf != nil {
			pr.bufs.put(buf) // consume's contract: nothing keeps a slice of buf
		}
	}()
	end := 0       // buf[:end] holds bytes that consume has not used yet
	var read int64 // bytes read from f so far
	var d drainClock
	writing := false // the last read returned bytes written after the exit
	sc, err := pr.f.SyscallConn()
	for err == nil && !pr.drained(&d, read, writing) {
		var n int
		n, err = pr.read(sc, &buf, end)
		writing = false
		if n > 0 {
			before := read
			read += int64(n)
			end += n
			start := time.Now()
			used := pr.consume(buf[:pr.bufs.head+end], start, false) - pr.bufs.head
			end = copy(buf[pr.bufs.head:], buf[pr.bufs.head+used:pr.bufs.head+end])
			if end == 0 {
				pr.bufs.put(buf)
				buf = nil
			}
			if pr.sawExit(&d, read) && before < d.backlog {
				// Only the part of the call after the exit was on the clock.
				from := start
				if d.exit.After(from) {
					from = d.exit
				}
				d.excluded += max(0, time.Since(from))
			}
			writing = !d.exit.IsZero() && read > d.backlog
		}
		// A deadline is how the reader wakes to look at its drain clock;
		// anything else (EOF, a read error) means nothing more can come.
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = nil
		}
	}
	if end > 0 {
		pr.consume(buf[:pr.bufs.head+end], time.Now(), true)
	}
}

// read reads from the pipe into buf[end:] and returns how many bytes it
// read, or io.EOF at the end. It takes a buffer from the pool only when
// the pipe has something to read, into *buf if that is nil, and gives it
// back if the pipe turns out empty and nothing is pending (end is 0): a
// command that prints nothing, or whole lines now and then, holds no
// buffer while its reader waits. (Running commands are capped by the
// thousand; two buffers of maxLine+readSize each would otherwise stay
// with every one of them for its whole life.)
func (pr *pipeReader) read(sc syscall.RawConn, buf *[]byte, end int) (int, error) {
	var n int
	var rerr error
	err := sc.Read(func(fd uintptr) bool {
		if *buf == nil {
			*buf = pr.bufs.get()
		}
		for {
			n, rerr = unix.Read(int(fd), (*buf)[pr.bufs.head+end:])
			if rerr != unix.EINTR {
				break
			}
		}
		if rerr == unix.EAGAIN {
			if end == 0 {
				pr.bufs.put(*buf)
				*buf = nil
			}
			return false // wait until the pipe is readable, then call again
		}
		return true
	})
	switch {
	case err != nil: // the read deadline, or f closed
		return 0, err
	case rerr != nil:
		return 0, rerr
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// sawExit reports whether the shell has exited; the first time it has, it
// starts d, measuring the backlog. read is how many bytes run has read.
func (pr *pipeReader) sawExit(d *drainClock, read int64) bool {
	if d.exit.IsZero() {
		at := pr.exit.Load()
		if at == nil {
			return false
		}
		d.exit = *at
		d.backlog = read + int64(pipeQueued(pr.f))
	}
	return true
}

// drained reports whether run should stop reading, and otherwise sets the
// read deadline at which the drain clock will need another look. writing
// says that the last read returned bytes written after the exit.
func (pr *pipeReader) drained(d *drainClock, read int64, writing bool) bool {
	if !pr.sawExit(d, read) {
		return false // the shell runs: read without a deadline until exited wakes us
	}
	if left := pr.drainDelay - (time.Since(d.exit) - d.excluded); left > 0 {
		_ = pr.f.SetReadDeadline(time.Now().Add(left))
		return false
	}
	queued := pipeQueued(pr.f)
	if queued > 0 && read < d.backlog {
		// Part of the backlog is still in the pipe, so the read cannot
		// block.
		_ = pr.f.SetReadDeadline(time.Time{})
		return false
	}
	// What is left, or still to come, is from background children after
	// the exit. If the pipe is empty and the last read was the deadline,
	// the children holding it were silent: nothing is cut. If bytes are
	// left, or the last read found new ones (a writer that never stops,
	// such as `yes &`, whose pipe a fast reader often finds empty), the
	// output is cut.
	pr.truncated = queued > 0 || writing
	return true
}

// pipeQueued returns how many bytes the pipe f holds, or 0 if that cannot
// be known (f closed, or the ioctl refused).
func pipeQueued(f *os.File) int {
	sc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	_ = sc.Control(func(fd uintptr) {
		// TIOCINQ is FIONREAD by its Linux name.
		if v, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ); err == nil {
			n = v
		}
	})
	return n
}

// buffers hands out the pipe readers' buffers of one size.
type buffers struct {
	pool *sync.Pool // of *[]byte
	size int
	// head is how many bytes at the start of each buffer are left free:
	// consume gets them before the bytes read, for a header of its own
	// (see StartStream). Zero for Run's and Start's readers.
	head int
	// grow makes the command's pipes as large as a pipe may be: readers
	// that take large chunks (StartStream's) let the command write on
	// while one is handed over.
	grow bool
}

func (b buffers) get() []byte {
	if p, ok := b.pool.Get().(*[]byte); ok && len(*p) == b.size {
		return *p
	}
	return make([]byte, b.size)
}

func (b buffers) put(buf []byte) { b.pool.Put(&buf) }
