package server

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// execution is one /exec_ws command: on pipes (pipeExec) or on a
// pseudo-terminal (ttyExec).
type execution interface {
	pid() int
	// begin lets output flow to the client, once started has been sent.
	begin()
	// wait returns how the command ended, once all its output was sent.
	wait() executor.Result
	termination(executor.Result) executor.Termination
	// input copies r, one stdin frame, to the command's stdin, waiting
	// for it to read. What it does not take, the caller drains.
	input(ctx context.Context, r io.Reader) error
	closeInput() error
	resize(cols, rows uint16) error
	signal(sig syscall.Signal) error
}

// startExec starts spec. Its output goes to conn (written with connCtx)
// once begin is called; runCtx ending kills the command.
func (s *Server) startExec(runCtx context.Context, conn *websocket.Conn, connCtx context.Context, spec execSpec) (execution, error) {
	ready := make(chan struct{})
	if spec.tty {
		return s.startTTYExec(runCtx, conn, connCtx, spec, ready)
	}
	x := &pipeExec{ready: ready, stdin: spec.cmd.Stdin}
	p, err := s.runner.StartStream(runCtx, spec.cmd, execChunkHead, execOutput(connCtx, conn, ready))
	if err != nil {
		return nil, err
	}
	x.p = p
	return x, nil
}

// execChunkHead is the free bytes before each chunk of output: its
// channel byte.
const execChunkHead = 1

// execOutput returns the ChunkFunc that sends a command's output as
// binary frames on channel 1 or 2, each chunk as it was read. It waits
// until ready is closed, so that started comes first. Writing blocks
// until the client has taken the frame: a slow client slows the command.
// After a failed write (the client left) the rest is read and dropped;
// the failure has cancelled connCtx, which kills the command.
func execOutput(connCtx context.Context, conn *websocket.Conn, ready <-chan struct{}) executor.ChunkFunc {
	// StartStream leaves execChunkHead free bytes before each chunk: the
	// channel byte goes there, and the frame is sent without copying.
	var failed atomic.Bool
	return func(st executor.Stream, b []byte) {
		<-ready
		if failed.Load() {
			return
		}
		b[0] = execStdout
		if st == executor.Stderr {
			b[0] = execStderr
		}
		if conn.Write(connCtx, websocket.MessageBinary, b) != nil {
			failed.Store(true)
		}
	}
}

// pipeExec is a command on pipes: stdout and stderr apart.
type pipeExec struct {
	p     *executor.Process
	ready chan struct{}
	stdin bool
	sent  sentSignals // the signals of signal messages
	// side is the stdin side channel; nil unless the request asked for
	// one. Once attached, it owns stdin.
	side *sideStdin
}

func (x *pipeExec) pid() int              { return x.p.Pid() }
func (x *pipeExec) begin()                { close(x.ready) }
func (x *pipeExec) wait() executor.Result { return x.p.Wait() }

func (x *pipeExec) termination(res executor.Result) executor.Termination {
	return res.Termination(x.sent.has, false)
}

func (x *pipeExec) input(ctx context.Context, r io.Reader) error {
	if !x.stdin {
		return nil // the request did not ask for stdin: ignored
	}
	if x.side != nil && x.side.attached.Load() {
		return protocolErrorf("stdin is on its side channel (stdin_id): no stdin frames once it is attached")
	}
	_, err := x.p.WriteStdin(ctx, r, 0)
	if errors.Is(err, executor.ErrStdinClosed) {
		return nil // closed, or the command ended: dropped, as a pipe would
	}
	return err
}

func (x *pipeExec) closeInput() error {
	if !x.stdin || (x.side != nil && x.side.attached.Load()) {
		return nil // the side channel closes stdin at its end
	}
	return x.p.CloseStdin()
}

func (x *pipeExec) resize(cols, rows uint16) error { return nil } // no terminal to size

func (x *pipeExec) signal(sig syscall.Signal) error {
	x.sent.add(sig)
	if err := x.p.Signal(sig); err != nil && !errors.Is(err, executor.ErrFinished) {
		return err
	}
	return nil
}

// sentSignals is the set of signals an /exec_ws client sent: a command
// that dies of one of them (or whose shell reports it, 128+n) was killed;
// see executor.Result.Termination, which says why with limits first.
type sentSignals struct{ bits atomic.Uint64 }

func (s *sentSignals) add(sig syscall.Signal) {
	if sig >= 1 && sig <= 64 {
		s.bits.Or(1 << (sig - 1))
	}
}

func (s *sentSignals) has(sig syscall.Signal) bool {
	return sig >= 1 && sig <= 64 && s.bits.Load()&(1<<(sig-1)) != 0
}

// execInput reads the client's frames in order: channel 0 is the
// command's stdin (a frame is written whole before the next is read, so
// a command that reads slowly slows the client), "255 0" closes it, text
// frames are control messages. A frame the protocol does not allow closes
// the connection with 1008.
//
// execInput is the connection's only reader. It runs in its own
// goroutine; it ends when the connection closes or fails, or ctx ends,
// and then calls gone: a client that leaves has its command killed.
func execInput(ctx context.Context, wg *sync.WaitGroup, conn *websocket.Conn, x execution, busy *atomic.Bool, gone context.CancelFunc) {
	defer wg.Done()
	defer gone()
	for {
		typ, r, err := conn.Reader(ctx)
		if err == nil {
			if typ == websocket.MessageBinary {
				busy.Store(true)
				err = execFrame(ctx, x, r)
				busy.Store(false)
			} else {
				var b []byte
				if b, err = io.ReadAll(r); err == nil { // the read limit bounds it
					err = applyControl(execTarget{x}, b, "send stdin as binary frames on channel 0")
				}
			}
		}
		if err == nil {
			// What the frame's handler did not take (input to a command
			// without stdin, or that closed it) is dropped: the next
			// frame can only be read after it.
			_, err = io.Copy(io.Discard, r)
		}
		if err != nil {
			var pe *wsProtocolError
			if errors.As(err, &pe) {
				_ = conn.Close(websocket.StatusPolicyViolation, pe.reason())
			}
			return
		}
	}
}

// pingExecClient is pingClient for /exec_ws, whose reader may wait for
// the command to read its stdin: while it does (busy), nobody reads the
// client's pongs, so a ping left unanswered then does not count. A
// command that ends, or reads, lets the reader go on.
//
// pingExecClient runs in its own goroutine, one per connection; it ends
// when ctx ends or it drops the client.
func pingExecClient(ctx context.Context, wg *sync.WaitGroup, conn *websocket.Conn, interval, timeout time.Duration, busy *atomic.Bool, drop context.CancelFunc) {
	defer wg.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if busy.Load() {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, timeout)
		err := conn.Ping(pctx)
		cancel()
		if err != nil && !busy.Load() && ctx.Err() == nil {
			drop()
			return
		}
	}
}

// execFrame applies one binary frame from the client, read from r as it
// arrives: a stdin frame streams into the command, never held whole.
func execFrame(ctx context.Context, x execution, r io.Reader) error {
	var ch [2]byte
	if _, err := io.ReadFull(r, ch[:1]); err != nil {
		if errors.Is(err, io.EOF) {
			return protocolErrorf("a binary frame starts with its channel byte")
		}
		return err
	}
	switch ch[0] {
	case execStdin:
		return x.input(ctx, r)
	case execClose:
		n, err := io.ReadFull(r, ch[1:])
		if n == 1 && ch[1] == execStdin {
			return x.closeInput()
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		return nil // closing stdout or stderr: ignored, as Kubernetes does
	}
	return protocolErrorf("channel %d is not the client's: send stdin on 0, close on 255", ch[0])
}

// execTarget is a command of /exec_ws as control messages act on it.
type execTarget struct{ x execution }

// resize sizes the command's terminal; one that has just ended cannot be
// sized, which is no matter.
func (c execTarget) resize(cols, rows uint16) error {
	_ = c.x.resize(cols, rows)
	return nil
}

func (c execTarget) signal(sig syscall.Signal) error { return c.x.signal(sig) }
