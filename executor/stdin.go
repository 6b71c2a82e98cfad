package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
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

	// mu guards writing and closing, and f's write deadline, which the
	// writer holding turn and its context watcher both set.
	mu      sync.Mutex
	writing bool // a writer holds turn
	closing bool // no writer may start; f is closed as soon as none writes
	ended   bool // the command has ended (set with closing)
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
	p.stdin = &stdinPipe{f: w, keep: c.Stdin, turn: make(chan struct{}, 1), closingCh: make(chan struct{})}
	return r, nil
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
	go s.writeInput(ctx, input)
}

// writeInput writes input, then closes the pipe unless keep. It runs in
// its own goroutine, started by startStdin and waited for by Process.wait
// (see endStdin). It ends once the input is written, or the write fails
// (the command closed its stdin or ended: EPIPE is normal for a command
// that does not read it all), or ctx ends, or the command has ended.
func (s *stdinPipe) writeInput(ctx context.Context, input string) {
	defer close(s.inputDone)
	_, _ = s.copy(ctx, strings.NewReader(input), 0, buffers{})
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
	return s.copy(ctx, src, stall, buffers{&p.runner.stdinBufs, stdinBufSize})
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

// copy writes src to the pipe; the caller holds turn. bufs gives the copy
// buffer when src cannot write itself out (an io.WriterTo); it is unused
// for those.
func (s *stdinPipe) copy(ctx context.Context, src io.Reader, stall time.Duration, bufs buffers) (int64, error) {
	w := &stdinWriter{s: s, ctx: ctx, stall: stall}
	stop := context.AfterFunc(ctx, w.cancel)
	defer w.finish(stop)
	if _, ok := src.(io.WriterTo); ok || bufs.pool == nil {
		return io.Copy(w, src)
	}
	buf := bufs.get()
	defer bufs.put(buf)
	return io.CopyBuffer(w, src, buf)
}

// stdinWriter is one writer's view of the pipe: each Write stops when ctx
// ends (cancel sets a deadline in the past) or, with a stall time, when
// the command takes nothing for that long.
type stdinWriter struct {
	s     *stdinPipe
	ctx   context.Context
	stall time.Duration
	// Guarded by s.mu: cancel may run while Write does.
	cancelled bool // ctx ended: the deadline is in the past
	finished  bool // the writer is done: cancel must not touch the deadline
}

// aLongTimeAgo is a deadline already past, which wakes a waiting write.
var aLongTimeAgo = time.Unix(1, 0)

// cancel is the writer's context watcher, run by context.AfterFunc.
func (w *stdinWriter) cancel() {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if !w.finished {
		w.cancelled = true
		_ = w.s.f.SetWriteDeadline(aLongTimeAgo)
	}
}

// finish stops the watcher and clears the deadline for the next writer.
func (w *stdinWriter) finish(stop func() bool) {
	stop()
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	w.finished = true
	_ = w.s.f.SetWriteDeadline(time.Time{}) // ErrClosed once the pipe is closed: nothing to clear
}

// arm sets the deadline of the next write; false if ctx has ended.
func (w *stdinWriter) arm() bool {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if w.cancelled {
		return false
	}
	if w.stall > 0 {
		_ = w.s.f.SetWriteDeadline(time.Now().Add(w.stall))
	}
	return true
}

func (w *stdinWriter) Write(b []byte) (int, error) {
	done := 0
	for len(b) > 0 {
		if !w.arm() {
			return done, w.ctx.Err()
		}
		n, err := w.s.f.Write(b)
		done += n
		b = b[n:]
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			if n == 0 {
				if ctxErr := w.ctx.Err(); ctxErr != nil {
					return done, ctxErr
				}
				return done, ErrStdinStalled
			}
			// The command took some: the stall clock starts again, unless
			// ctx has ended (arm says so).
		case errors.Is(err, syscall.EPIPE):
			return done, fmt.Errorf("%w: the process closed it or exited", ErrStdinClosed)
		case errors.Is(err, os.ErrClosed):
			return done, errEnded // only endStdin closes the pipe under a writer
		default:
			return done, err
		}
	}
	return done, nil
}
