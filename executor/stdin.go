package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A command's standard input. Without Command.Input or Command.Stdin it is
// /dev/null, so that nothing can wait for input nobody sends. With either,
// it is a pipe whose write end the agent keeps: Input is written first, by
// a goroutine of the command's own (writeInput), then the pipe is closed,
// unless Command.Stdin keeps it open for WriteStdin until CloseStdin. The
// write end is non-blocking, so a write waits in the runtime's poller,
// never in an OS thread, and a deadline can end it; Process.wait closes it
// when the command ends, which ends any write still waiting.

var (
	// ErrNoStdin is returned by WriteStdin and CloseStdin for a command
	// started without Command.Stdin.
	ErrNoStdin = errors.New("process was started without stdin")
	// ErrStdinClosed is returned by WriteStdin once stdin is closed: by
	// CloseStdin, by the command (it closed its end, or exited), or
	// because the command has ended, in which case the error also wraps
	// ErrFinished.
	ErrStdinClosed = errors.New("stdin is closed")
	// ErrStdinStalled is returned by WriteStdin when the command took none
	// of the bytes for the stall time it was given.
	ErrStdinStalled = errors.New("the process is not reading its stdin")
)

// errEnded is WriteStdin's error once the command has ended.
var errEnded = fmt.Errorf("%w: %w", ErrStdinClosed, ErrFinished)

// stdinPipe is the write end of a command's stdin.
type stdinPipe struct {
	f    *os.File
	keep bool // Command.Stdin: the pipe stays open after the input
	// turn holds one token while a writer (writeInput or a WriteStdin)
	// writes: taking it is the write lock, which keeps what two writers
	// write from interleaving. A channel rather than a mutex lets a
	// waiting writer give up when its context ends.
	turn      chan struct{}
	closingCh chan struct{} // closed once closing is set, to release waiting writers
	inputDone chan struct{} // closed when writeInput ends; nil without input
	closeOnce sync.Once     // closes f

	// mu guards the fields below, and f's write deadline and the read
	// deadline of a writer's socket, which the writer holding turn, its
	// context watcher and endStdin all set.
	mu      sync.Mutex
	writing bool         // a writer holds turn
	writer  *stdinWriter // the writer's state while it copies; nil between copies
	closing bool         // no writer may start; f is closed as soon as none writes
	ended   bool         // the command has ended (set with closing)
}

// openStdin creates p's stdin pipe if c asks for one, and returns its read
// end for the child, or nil if the child is to read /dev/null. The caller
// closes the read end once the child has started (or failed to), and calls
// abortStdin if it did not start.
func (p *Process) openStdin(c Command) (*os.File, error) {
	if c.Input == "" && !c.Stdin {
		return nil, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	growPipe(w)
	p.stdin = &stdinPipe{f: w, keep: c.Stdin, turn: make(chan struct{}, 1), closingCh: make(chan struct{})}
	return r, nil
}

// stdinPipeSize is the capacity asked for a stdin pipe: the default
// maximum of an unprivileged pipe (/proc/sys/fs/pipe-max-size), sixteen
// times the default 64 KiB. A large write then wakes the command once a
// megabyte rather than once every 64 KiB. The pages are the kernel's, and
// only while they hold data the command has not read.
const stdinPipeSize = 1 << 20

// growPipe sets w's pipe to stdinPipeSize, if the system allows it; if
// not, the pipe keeps its capacity. It goes through SyscallConn: Fd would
// make w blocking.
func growPipe(w *os.File) {
	if sc, err := w.SyscallConn(); err == nil {
		_ = sc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, stdinPipeSize) })
	}
}

// abortStdin closes the write end of a command that did not start.
func (p *Process) abortStdin() {
	if p.stdin != nil {
		_ = p.stdin.f.Close()
	}
}

// startStdin starts the writing of input, if any, once the command has
// started; without input and without keep, it closes the pipe at once.
// The input writer takes turn here, before anyone can call WriteStdin, so
// that the input always comes first.
func (p *Process) startStdin(ctx context.Context, input string) {
	s := p.stdin
	if s == nil {
		return
	}
	if input == "" {
		if !s.keep {
			s.close() // an empty Input: EOF at once, as from /dev/null
		}
		return
	}
	s.turn <- struct{}{} // free: nobody else has seen s
	s.writing = true
	s.inputDone = make(chan struct{})
	r := p.runner
	go s.writeInput(ctx, input, buffers{pool: &r.stdinBufs, size: stdinBufSize}, func() { r.giveInput(len(input)) })
}

// writeInput writes input, then closes the pipe unless keep, then calls
// done, which gives input's bytes back to the Runner's budget: input is
// not referenced after it returns. It runs in its own goroutine, started
// by startStdin and waited for by Process.wait (see endStdin). It ends
// once the input is written, or the write fails (the command closed its
// stdin or ended: EPIPE is normal for a command that does not read it
// all), or ctx ends, or the command has ended.
func (s *stdinPipe) writeInput(ctx context.Context, input string, bufs buffers, done func()) {
	defer close(s.inputDone)
	defer done()
	_, _ = s.copy(ctx, strings.NewReader(input), 0, bufs)
	if !s.keep {
		s.mu.Lock()
		s.setClosingLocked()
		s.mu.Unlock()
	}
	s.unlock()
}

// endStdin closes stdin when the command has ended, ending any write
// still waiting, and waits for the input writer. Process.wait calls it.
func (p *Process) endStdin() {
	s := p.stdin
	if s == nil {
		return
	}
	s.mu.Lock()
	s.ended = true
	s.setClosingLocked()
	if s.writer != nil {
		s.writer.stopLocked(errEnded) // wakes it if it waits for a socket, not the pipe
	}
	s.mu.Unlock()
	s.closeFile() // a write waiting in the poller returns at once
	if s.inputDone != nil {
		<-s.inputDone
	}
}

// WriteStdin copies src to the command's stdin and returns how many bytes
// it wrote. It holds stdin's write lock throughout, so what two calls
// write never interleaves, and it comes after the whole of Command.Input.
// Nothing is retried or added.
//
// It waits for the lock, and for the command to read, as long as ctx
// lasts; if stall is positive, it also gives up with ErrStdinStalled when
// the command takes no byte for that long (for between stall and twice
// stall). An error from src is returned as it is; an error of the write
// wraps ErrNoStdin (the command was started without Command.Stdin),
// ErrStdinClosed or ErrStdinStalled, or is ctx's.
func (p *Process) WriteStdin(ctx context.Context, src io.Reader, stall time.Duration) (int64, error) {
	s := p.stdin
	if s == nil || !s.keep {
		return 0, ErrNoStdin
	}
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.unlock()
	return s.copy(ctx, src, stall, buffers{pool: &p.runner.stdinBufs, size: stdinBufSize})
}

// CloseStdin closes the command's stdin: it reads EOF after what was
// written before, the input included. A WriteStdin in progress is not cut
// (nor waited for): the pipe closes when it ends. A WriteStdin that waits
// for the lock, or comes later, gets ErrStdinClosed. Closing again, or
// after the command has ended, does nothing. Without Command.Stdin it
// returns ErrNoStdin.
func (p *Process) CloseStdin() error {
	s := p.stdin
	if s == nil || !s.keep {
		return ErrNoStdin
	}
	s.close()
	return nil
}

// stdinBufSize is the size of WriteStdin's copy buffer: four default pipe
// capacities, so that one write can fill the pipe while the command
// empties it.
const stdinBufSize = 256 << 10

// lock takes turn, unless ctx ends or stdin closes first.
func (s *stdinPipe) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case s.turn <- struct{}{}:
	case <-s.closingCh:
		return s.closedError()
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		<-s.turn
		return s.closedError()
	}
	s.writing = true
	s.mu.Unlock()
	return nil
}

// closedError is the error of a writer that found stdin closed.
func (s *stdinPipe) closedError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return errEnded
	}
	return ErrStdinClosed
}

// unlock gives turn back, first closing the pipe if a close was asked for
// while the holder wrote.
func (s *stdinPipe) unlock() {
	s.mu.Lock()
	s.writing = false
	closing := s.closing
	s.mu.Unlock()
	if closing {
		s.closeFile()
	}
	<-s.turn
}

// close closes the pipe now, or once the writer holding turn is done.
func (s *stdinPipe) close() {
	s.mu.Lock()
	s.setClosingLocked()
	busy := s.writing
	s.mu.Unlock()
	if !busy {
		s.closeFile()
	}
}

func (s *stdinPipe) setClosingLocked() {
	if !s.closing {
		s.closing = true
		close(s.closingCh)
	}
}

func (s *stdinPipe) closeFile() {
	s.closeOnce.Do(func() { _ = s.f.Close() })
}
