package server

import (
	"context"
	"errors"
	"io"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// ttyDrain bounds how long a TTY command's output is still read after
// its program has exited, for background jobs that keep the terminal open;
// see ttyDrainClock.
const ttyDrain = 2 * time.Second

// ttyExec is a command on a pseudo-terminal: one output stream, resizable.
type ttyExec struct {
	p        *executor.Process
	master   *os.File
	ready    chan struct{}
	done     chan struct{} // closed by output once res is set
	res      executor.Result
	timedOut atomic.Bool
	sent     sentSignals
	touch    func() // marks the session used; see execSpec.touch
}

// startTTYExec starts spec on a new pseudo-terminal, and ttyOutput to
// send its output.
func (s *Server) startTTYExec(runCtx context.Context, conn *websocket.Conn, connCtx context.Context, spec execSpec, ready chan struct{}) (execution, error) {
	c := spec.cmd
	p, master, err := s.runner.StartTTY(executor.TTYCommand{Args: spec.args, Dir: c.Dir, Env: c.Env, BaseEnv: c.BaseEnv,
		User: c.User, OnStart: c.OnStart, Cols: spec.cols, Rows: spec.rows, Limits: c.Limits})
	if err != nil {
		return nil, err
	}
	x := &ttyExec{p: p, master: master, ready: ready, done: make(chan struct{}), touch: spec.touch}
	if x.touch == nil {
		x.touch = func() {}
	}
	go x.output(runCtx, connCtx, conn, spec.timeout)
	return x, nil
}

// output sends what the terminal shows as channel-1 frames until the
// terminal is gone (EIO once no process holds it), or the drain clock
// says stop after the program exited (see ttyDrainClock); then closes the
// master and sets res. It kills the command's session when runCtx ends or
// the timeout passes.
//
// output runs in its own goroutine, one per TTY command; wait waits for it.
func (x *ttyExec) output(runCtx, connCtx context.Context, conn *websocket.Conn, timeout time.Duration) {
	defer close(x.done)
	stopKill := context.AfterFunc(runCtx, func() { _ = x.p.Kill() })
	defer stopKill()
	if timeout > 0 {
		t := time.AfterFunc(timeout, func() { x.timedOut.Store(true); _ = x.p.Kill() })
		defer t.Stop()
	}
	<-x.ready
	// The terminal reads EIO once no process holds it; a background job
	// may hold it past the program's exit, so from then on the reading
	// has a deadline.
	var clock ttyDrainClock
	exited, stopWatch := make(chan struct{}), make(chan struct{})
	go x.watchExit(&clock, stopWatch, exited)
	buf := make([]byte, 1+wsOutputFrame)
	buf[0] = execStdout
	failed := false
	for {
		if end, ok := clock.deadline(); ok {
			if !time.Now().Before(end) {
				break // drained
			}
			_ = x.master.SetReadDeadline(end)
		}
		n, err := x.master.Read(buf[1:])
		if n > 0 {
			x.touch()
			start := time.Now()
			if !failed && conn.Write(connCtx, websocket.MessageBinary, buf[:1+n]) != nil {
				failed = true // the client left; connCtx's end kills the command
			}
			clock.sent(n, start)
		}
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			break // EIO: nobody holds the terminal any more
		}
	}
	close(stopWatch)
	<-exited
	_ = x.master.Close() // hangs up whatever background job is left
	x.res = x.p.Wait()
	if x.timedOut.Load() {
		x.res.TimedOut, x.res.Code = true, executor.ExitTimedOut
	}
}

// ttyBacklog bounds the output read after a TTY program's exit whose
// delivery to the client is off the drain clock. It is more than a
// pseudo-terminal holds (Linux queues at most 8 KiB for the master beside
// its 4 KiB line buffer), so it covers all that the program wrote before
// it exited; what background jobs write later is read on the clock.
const ttyBacklog = 64 << 10

// ttyDrainClock is output's drain clock, as pipeReader's is for pipes:
// the reading stops ttyDrain after the program's exit, not counting the
// time spent handing the backlog (what the terminal held at the exit) to
// the client. Counted, a client that read nothing for ttyDrain just after
// the exit lost the end of the output, and was told exit 0.
type ttyDrainClock struct {
	exit atomic.Pointer[time.Time] // set once, by watchExit
	// Only output uses these.
	excluded time.Duration // time spent sending the backlog after the exit
	after    int           // bytes read after the exit, up to ttyBacklog
}

// deadline returns when the reading stops; ok is false before the exit.
func (c *ttyDrainClock) deadline() (end time.Time, ok bool) {
	at := c.exit.Load()
	if at == nil {
		return time.Time{}, false
	}
	return at.Add(ttyDrain + c.excluded), true
}

// sent takes off the clock the time since start, when the sending of n
// bytes began, that fell after the exit, while the backlog lasts.
func (c *ttyDrainClock) sent(n int, start time.Time) {
	at := c.exit.Load()
	if at == nil || c.after >= ttyBacklog {
		return
	}
	c.after += n
	if at.After(start) {
		start = *at
	}
	c.excluded += max(0, time.Since(start))
}

// watchExit starts clock at the program's exit, and wakes output's read
// so that it sets the deadline. It runs in its own goroutine, owned by
// output; it ends then, or when stop is closed, and closes exited.
func (x *ttyExec) watchExit(clock *ttyDrainClock, stop <-chan struct{}, exited chan<- struct{}) {
	defer close(exited)
	select {
	case <-x.p.Done():
		at := time.Now()
		clock.exit.Store(&at)
		_ = x.master.SetReadDeadline(at)
	case <-stop:
	}
}

func (x *ttyExec) pid() int              { return x.p.Pid() }
func (x *ttyExec) begin()                { close(x.ready) }
func (x *ttyExec) wait() executor.Result { <-x.done; return x.res }

func (x *ttyExec) termination(res executor.Result) executor.Termination {
	return res.Termination(x.sent.has, false)
}

func (x *ttyExec) input(ctx context.Context, r io.Reader) error {
	x.touch()
	_, _ = io.Copy(x.master, r) // an error means the terminal is gone: the exit is on its way
	return nil
}

// closeInput types the end-of-file character (Ctrl-D): a terminal's input
// has no end of its own.
func (x *ttyExec) closeInput() error {
	_, _ = x.master.Write([]byte{4})
	return nil
}

func (x *ttyExec) resize(cols, rows uint16) error { return executor.Resize(x.master, cols, rows) }

// signal sends sig to the terminal's foreground job, as typing its key
// would; to the program's group if that cannot be known.
func (x *ttyExec) signal(sig syscall.Signal) error {
	x.sent.add(sig)
	if pgrp, err := executor.ForegroundGroup(x.master); err == nil && pgrp > 0 {
		if err := syscall.Kill(-pgrp, sig); err == nil || errors.Is(err, syscall.ESRCH) {
			return nil
		}
	}
	if err := x.p.Signal(sig); err != nil && !errors.Is(err, executor.ErrFinished) {
		return err
	}
	return nil
}
