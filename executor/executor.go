// Package executor runs shell commands: each in its own process group, with
// both pipes drained to the end whatever they hold, killed as a group when
// its context ends or its timeout passes, and with every wait bounded.
package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ExitTimedOut is the exit code of a command stopped by its timeout, as
// coreutils' timeout(1) reports it.
const ExitTimedOut = 124

var (
	// ErrInvalidDir is returned by Start and Run when Command.Dir is not
	// a directory; the error text names the directory.
	ErrInvalidDir = errors.New("cwd is not a directory")
	// ErrFinished is returned by Signal once the command has finished.
	ErrFinished = errors.New("process already finished")
	// ErrInvalidCommand is returned by Start and Run for a command that
	// no process could be given: a NUL byte in it or in its environment,
	// or an environment variable whose name is empty or holds '='.
	ErrInvalidCommand = errors.New("invalid command")
)

// Command is one shell command to run.
type Command struct {
	Cmd string            // run as Shell -c Cmd
	Dir string            // working directory; empty means the agent's own
	Env map[string]string // added to Runner.Env; nil adds nothing
	// Timeout, if positive, is how long the command may run before its
	// process group is killed and it ends with ExitTimedOut.
	Timeout time.Duration
}

// Runner starts commands. The zero Runner is ready to use.
type Runner struct {
	// Shell runs each command as Shell -c Cmd. If empty, "/bin/sh".
	Shell string
	// Env is the environment every command starts from. If nil, the
	// agent's own environment, read at each start.
	Env []string
	// MaxLine is the longest line handed to a LineFunc; longer lines come
	// in pieces. If zero, 32 KiB.
	MaxLine int
	// MaxOutput caps what Run keeps of each of stdout and stderr, in
	// bytes; the middle of longer output is dropped. If zero, 8 MiB.
	MaxOutput int
	// DrainDelay bounds how long a command's output is still read after
	// its shell has exited, for background children that keep the pipes
	// open. If zero, 2 s.
	DrainDelay time.Duration
	// Reaper, if set, starts every command, so that it can reap orphaned
	// zombies without ever taking a child this Runner waits for. Set it
	// when the agent runs as PID 1.
	Reaper *Reaper

	// The pipe readers' buffers are reused: a /run of `true` would
	// otherwise allocate two of them, most of its garbage.
	rawBufs  sync.Pool // *[]byte of readSize, for Run
	lineBufs sync.Pool // *[]byte of maxLine()+readSize, for Start
}

func (r *Runner) shell() string {
	if r.Shell == "" {
		return "/bin/sh"
	}
	return r.Shell
}

// maxLine returns the longest line handed to a LineFunc.
func (r *Runner) maxLine() int {
	if r.MaxLine <= 0 {
		return 32 << 10
	}
	return r.MaxLine
}

func (r *Runner) maxOutput() int {
	if r.MaxOutput <= 0 {
		return 8 << 20
	}
	return r.MaxOutput
}

func (r *Runner) drainDelay() time.Duration {
	if r.DrainDelay <= 0 {
		return 2 * time.Second
	}
	return r.DrainDelay
}

// Result is how a command ended.
type Result struct {
	// Code is the exit status: the shell's own, 128+n if the shell was
	// ended by signal n, or ExitTimedOut if its timeout passed.
	Code int
	// Signal is the signal that ended the shell, or 0 if it exited.
	Signal syscall.Signal
	// TimedOut is true if the command's timeout killed it.
	TimedOut bool
}

// Process is a started command.
type Process struct {
	cmd      *exec.Cmd
	reaper   *Reaper       // nil unless Runner.Reaper was set
	done     chan struct{} // closed by wait once res is set
	res      Result
	timedOut atomic.Bool // set by cmd.Cancel when the timeout, not the caller, ended the command
}

// Run runs c to the end and returns its result with what it wrote, each
// stream capped at MaxOutput bytes. If ctx ends first, the process group
// is killed and Run returns once it is gone.
func (r *Runner) Run(ctx context.Context, c Command) (Output, error) {
	cs := &captureSet{stdout: capture{max: r.maxOutput()}, stderr: capture{max: r.maxOutput()}}
	p, err := r.start(ctx, c, buffers{&r.rawBufs, readSize}, cs.consumer(Stdout), cs.consumer(Stderr))
	if err != nil {
		return Output{}, err
	}
	res := p.Wait()
	return Output{
		Result:    res,
		Stdout:    cs.stdout.bytes(),
		Stderr:    cs.stderr.bytes(),
		Truncated: cs.stdout.dropped > 0 || cs.stderr.dropped > 0,
	}, nil
}

// Start starts c and hands its output to fn line by line as it is read.
// When ctx ends, the process group is killed. Every line has been handed
// to fn before Wait returns.
func (r *Runner) Start(ctx context.Context, c Command, fn LineFunc) (*Process, error) {
	maxLine := r.maxLine()
	return r.start(ctx, c, buffers{&r.lineBufs, maxLine + readSize},
		lineConsumer(Stdout, maxLine, fn), lineConsumer(Stderr, maxLine, fn))
}

type consumeFunc = func(b []byte, t time.Time, eof bool) int

func (r *Runner) start(ctx context.Context, c Command, bufs buffers, stdout, stderr consumeFunc) (*Process, error) {
	if err := Check(c); err != nil {
		return nil, err
	}
	parent := ctx
	cancelTimeout := context.CancelFunc(func() {})
	if c.Timeout > 0 {
		ctx, cancelTimeout = context.WithTimeout(ctx, c.Timeout)
	}
	p := &Process{done: make(chan struct{})}
	cmd := exec.CommandContext(ctx, r.shell(), "-c", c.Cmd)
	cmd.Dir = c.Dir
	cmd.Env = r.env(c.Env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// exec calls Cancel from its own goroutine when ctx ends while the
	// shell runs; killing the group rather than the shell is what stops
	// grandchildren too.
	cmd.Cancel = func() error {
		if parent.Err() == nil {
			p.timedOut.Store(true)
		}
		return killGroup(cmd.Process.Pid, syscall.SIGKILL)
	}
	p.cmd = cmd

	outR, outW, err := os.Pipe()
	if err != nil {
		cancelTimeout()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		cancelTimeout()
		closeAll(outR, outW)
		return nil, err
	}
	// Passing *os.File makes the child write straight into the pipes: no
	// copying goroutine inside exec, and Wait does not wait for output.
	cmd.Stdout, cmd.Stderr = outW, errW
	p.reaper = r.Reaper
	if err := p.startCmd(); err != nil {
		cancelTimeout()
		closeAll(outR, outW, errR, errW)
		return nil, err
	}
	closeAll(outW, errW) // the child has its copies; EOF comes when it and its children close theirs

	readers := make(chan struct{}, 2)
	go readPipe(outR, bufs, stdout, readers)
	go readPipe(errR, bufs, stderr, readers)
	go p.wait(ctx, cancelTimeout, r.drainDelay(), readers, outR, errR)
	return p, nil
}

// Check returns the error Start and Run would return for c before
// starting anything: one wrapping ErrInvalidCommand or ErrInvalidDir.
// Callers that must answer before they start (a stream that opens first)
// call it themselves.
func Check(c Command) error {
	if err := c.check(); err != nil {
		return err
	}
	return checkDir(c.Dir)
}

// check returns an error wrapping ErrInvalidCommand if c cannot be passed
// to execve(2), which would refuse it with a bare "invalid argument".
func (c Command) check() error {
	if strings.IndexByte(c.Cmd, 0) >= 0 {
		return fmt.Errorf("%w: cmd contains a NUL byte", ErrInvalidCommand)
	}
	for k, v := range c.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("%w: environment variable name %q", ErrInvalidCommand, k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("%w: environment variable %s contains a NUL byte", ErrInvalidCommand, k)
		}
	}
	return nil
}

// checkDir returns an error wrapping ErrInvalidDir, naming dir, unless dir
// is empty or a directory.
func checkDir(dir string) error {
	if dir == "" {
		return nil
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("%w: %s", ErrInvalidDir, dir)
	}
	return nil
}

func (p *Process) startCmd() error {
	if p.reaper != nil {
		return p.reaper.Start(p.cmd)
	}
	return p.cmd.Start()
}

func (r *Runner) env(extra map[string]string) []string {
	base := r.Env
	if base == nil {
		base = os.Environ()
	}
	if len(extra) == 0 {
		return base
	}
	env := make([]string, len(base), len(base)+len(extra))
	copy(env, base)
	for k, v := range extra {
		env = append(env, k+"="+v) // exec keeps the last of duplicate keys
	}
	return env
}

// wait is the only caller of cmd.Wait. It runs in its own goroutine; it
// ends when the shell has exited and both pipe readers have finished, or,
// if children of the shell hold the pipes open, drainDelay after the shell
// exited. It owns the two readPipe goroutines.
func (p *Process) wait(ctx context.Context, cancelTimeout context.CancelFunc, drainDelay time.Duration,
	readers <-chan struct{}, pipes ...*os.File) {
	defer cancelTimeout()
	_ = p.cmd.Wait() // the exit status is read from ProcessState below
	if p.reaper != nil {
		p.reaper.Done(p.cmd.Process.Pid)
	}

	drain := time.NewTimer(drainDelay)
	defer drain.Stop()
	ctxDone := ctx.Done()
	for n := 0; n < 2; {
		select {
		case <-readers:
			n++
		case <-ctxDone:
			// Cancelled or timed out while children still hold the pipes.
			_ = killGroup(p.cmd.Process.Pid, syscall.SIGKILL)
			ctxDone = nil
		case <-drain.C:
			for _, f := range pipes {
				_ = f.SetReadDeadline(time.Now()) // readPipe then hands over what it has and returns
			}
		}
	}

	p.res = result(p.cmd.ProcessState, p.timedOut.Load())
	close(p.done)
}

func result(ps *os.ProcessState, timedOut bool) Result {
	var res Result
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.Signal = ws.Signal()
		res.Code = 128 + int(res.Signal)
	} else {
		res.Code = ps.ExitCode()
	}
	if timedOut {
		res.TimedOut = true
		res.Code = ExitTimedOut
	}
	return res
}

// Pid returns the process id of the shell, which is also the id of the
// command's process group.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done returns a channel that is closed when the command has ended and all
// its output has been read.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for the command to end and its output to be read, and returns
// how it ended.
func (p *Process) Wait() Result {
	<-p.done
	return p.res
}

// Signal sends sig to the command's whole process group. Once the command
// has finished it returns ErrFinished and sends nothing, so a process id
// that the system has reused is never signalled.
func (p *Process) Signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return ErrFinished
	default:
	}
	return killGroup(p.cmd.Process.Pid, sig)
}

// killGroup sends sig to process group pgid. A group that is already gone
// is not an error.
func killGroup(pgid int, sig syscall.Signal) error {
	err := syscall.Kill(-pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}
