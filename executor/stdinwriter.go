package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// copy writes src to the pipe; the caller holds turn. An io.WriterTo
// (strings.Reader, bytes.Reader: the input, a JSON write) writes itself
// out in one Write; anything else goes through stdinWriter.ReadFrom,
// which copies through a buffer of bufs, or splices from a socket.
func (s *stdinPipe) copy(ctx context.Context, src io.Reader, stall time.Duration, bufs buffers) (int64, error) {
	w := &stdinWriter{s: s, ctx: ctx, stall: stall, bufs: bufs}
	s.mu.Lock()
	s.writer = w
	if s.ended {
		w.stopLocked(errEnded)
	}
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, w.cancel)
	defer w.finish(stop)
	var n int64
	var err error
	if wt, ok := src.(io.WriterTo); ok {
		n, err = wt.WriteTo(w)
	} else {
		n, err = w.ReadFrom(src)
	}
	if err != nil {
		// A source read that the stop woke (a deadline in the past on
		// its socket) fails with its own error: the stop's is the truth.
		if stopped := w.stoppedBy(); stopped != nil {
			err = stopped
		}
	}
	return n, err
}

// stdinWriter is one writer's view of the pipe. A write stops when ctx
// ends or the command ends (a deadline in the past wakes it) or, with a
// stall time, when no byte moves for that long.
type stdinWriter struct {
	s     *stdinPipe
	ctx   context.Context
	stall time.Duration
	bufs  buffers // for ReadFrom's copy; unused when every source is a WriterTo or a socket

	// Guarded by s.mu: cancel and endStdin may run while the writer writes.
	stopped  error        // ctx's error or errEnded once either has stopped the writer
	finished bool         // the writer is done: no deadline may be set any more
	source   spliceSource // the socket being spliced from, whose read deadline stopLocked sets too; nil if none
}

// aLongTimeAgo is a deadline already past, which wakes a waiting write.
var aLongTimeAgo = time.Unix(1, 0)

// cancel is the writer's context watcher, run by context.AfterFunc.
func (w *stdinWriter) cancel() {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	w.stopLocked(w.ctx.Err())
}

// stopLocked stops the writer with err: whatever it waits for, the pipe or
// a socket, wakes with a deadline error that the writer turns into err.
// s.mu must be held.
func (w *stdinWriter) stopLocked(err error) {
	if w.finished || w.stopped != nil {
		return
	}
	w.stopped = err
	_ = w.s.f.SetWriteDeadline(aLongTimeAgo)
	if w.source != nil {
		_ = w.source.SetReadDeadline(aLongTimeAgo)
	}
}

// finish stops the watcher and clears the deadlines for the next writer.
func (w *stdinWriter) finish(stop func() bool) {
	stop()
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	w.finished = true
	w.s.writer = nil
	_ = w.s.f.SetWriteDeadline(time.Time{}) // ErrClosed once the pipe is closed: nothing to clear
	if w.source != nil {
		_ = w.source.SetReadDeadline(time.Time{})
	}
}

// arm sets the deadlines of the next wait: the pipe's and, while
// splicing, the socket's. It returns the error that stopped the writer,
// if one has.
func (w *stdinWriter) arm() error {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if w.stopped != nil {
		return w.stopped
	}
	if w.stall > 0 {
		at := time.Now().Add(w.stall)
		_ = w.s.f.SetWriteDeadline(at)
		if w.source != nil {
			_ = w.source.SetReadDeadline(at)
		}
	}
	return nil
}

// stoppedBy returns the error that stopped the writer, or nil.
func (w *stdinWriter) stoppedBy() error {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.stopped
}

func (w *stdinWriter) Write(b []byte) (int, error) {
	done := 0
	for len(b) > 0 {
		if err := w.arm(); err != nil {
			return done, err
		}
		n, err := w.s.f.Write(b)
		done += n
		b = b[n:]
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			if stopped := w.stoppedBy(); stopped != nil {
				return done, stopped
			}
			if n == 0 {
				return done, ErrStdinStalled
			}
			// The command took some: the stall clock starts again.
		default:
			return done, w.pipeError(err)
		}
	}
	return done, nil
}

// pipeError is the writer's error for err, a failed write to the pipe
// that was not a deadline.
func (w *stdinWriter) pipeError(err error) error {
	switch {
	case errors.Is(err, syscall.EPIPE):
		return fmt.Errorf("%w: the process closed it or exited", ErrStdinClosed)
	case errors.Is(err, os.ErrClosed), w.s.isEnded():
		return errEnded // only endStdin closes the pipe under a writer
	}
	return err
}

// ReadFrom copies r into the pipe: by splice(2) if r is an
// *io.LimitedReader of a socket (see splice), else through a buffer.
// io.Copy and a MultiReader's WriteTo come here.
func (w *stdinWriter) ReadFrom(r io.Reader) (int64, error) {
	if lr, ok := r.(*io.LimitedReader); ok {
		if src, ok := lr.R.(spliceSource); ok {
			if n, handled, err := w.splice(src, lr); handled {
				return n, err
			}
		}
	}
	buf := w.bufs.get()
	defer w.bufs.put(buf)
	return io.CopyBuffer(writerOnly{w}, r, buf)
}

// writerOnly hides stdinWriter's ReadFrom from io.CopyBuffer, which would
// call it rather than use the buffer.
type writerOnly struct{ io.Writer }

func (s *stdinPipe) isEnded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}
