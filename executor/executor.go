// Package executor runs shell commands: each in its own process group, with
// both pipes drained to the end whatever they hold, killed as a group when
// its context ends or its timeout passes, and with every wait bounded.
package executor

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Run runs c to the end and returns its result with what it wrote, each
// stream capped at MaxOutput bytes. If ctx ends first, the process group
// is killed and Run returns once it is gone. If c cannot start, the error
// wraps ErrInvalidCommand or ErrInvalidDir (the command's fault), ErrBusy,
// or is the system's.
func (r *Runner) Run(ctx context.Context, c Command) (Output, error) {
	return r.RunCapped(ctx, c, r.maxOutput())
}

// RunCapped is Run with each stream capped at maxOutput bytes instead of
// MaxOutput (which still bounds it: a larger maxOutput is MaxOutput). The
// first half of the cap keeps how a stream started and the second half how
// it ended, with the marker line between them; Output.Omitted counts the
// bytes of the middle that were dropped.
func (r *Runner) RunCapped(ctx context.Context, c Command, maxOutput int) (Output, error) {
	maxOutput = min(max(maxOutput, 1), r.maxOutput())
	cs := &captureSet{stdout: capture{max: maxOutput}, stderr: capture{max: maxOutput}}
	p, err := r.start(ctx, c, buffers{pool: &r.rawBufs, size: readSize}, cs.consumer(Stdout), cs.consumer(Stderr))
	if err != nil {
		return Output{}, err
	}
	out := Output{Result: p.Wait()}
	out.Truncated = out.Truncated || cs.stdout.dropped > 0 || cs.stderr.dropped > 0
	out.Stdout, out.Stderr = cs.stdout.bytes(), cs.stderr.bytes()
	out.Omitted = cs.stdout.dropped + cs.stderr.dropped
	return out, nil
}

// Start starts c and hands its output to fn line by line as it is read.
// When ctx ends, the process group is killed. Every line has been handed
// to fn before Wait returns. Its errors are Run's.
func (r *Runner) Start(ctx context.Context, c Command, fn LineFunc) (*Process, error) {
	return r.StartTee(ctx, c, fn, nil)
}

func (r *Runner) start(ctx context.Context, c Command, bufs buffers, stdout, stderr consumeFunc) (*Process, error) {
	if err := r.check(c); err != nil {
		return nil, err
	}
	if err := r.acquire(); err != nil {
		return nil, err
	}
	if err := r.takeInput(len(c.Input)); err != nil {
		r.release(nil)
		return nil, err
	}
	p, err := r.startProcess(ctx, c, false, bufs, stdout, stderr)
	if err != nil && c.Argv != nil && isExecError(err) {
		// The program was found but could not be executed (a missing
		// interpreter, no permission for c.User): the shell tries it
		// again and reports it as it would, 127 or 126.
		p, err = r.startProcess(ctx, c, true, bufs, stdout, stderr)
	}
	if err != nil {
		r.release(nil)
		r.giveInput(len(c.Input)) // no writer started to give it back
		return nil, err
	}
	return p, nil
}

// startProcess starts c, whose slot acquire has taken; see start.
// viaShell starts an Argv through the shell; see program.
func (r *Runner) startProcess(ctx context.Context, c Command, viaShell bool, bufs buffers, stdout, stderr consumeFunc) (*Process, error) {
	// The timeout's clock starts once the shell has started (see below):
	// a context that expired before would make exec refuse to start, and
	// a timeout of a microsecond is a timeout, not a failure to start.
	parent := ctx
	ctx, cancelTimeout := context.WithCancel(ctx)
	p := &Process{runner: r, done: make(chan struct{})}
	env := r.env(c)
	path, args := r.program(c, env, viaShell)
	cmd := exec.CommandContext(ctx, path)
	// The path is resolved already, in the command's environment: exec
	// must not look it up again in the agent's.
	cmd.Path, cmd.Args, cmd.Err = path, args, nil
	cmd.Dir = c.Dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.credential()}
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
	inR, err := p.openStdin(c)
	if err != nil {
		cancelTimeout()
		closeAll(outR, outW, errR, errW)
		return nil, err
	}
	// Passing *os.File makes the child write straight into the pipes: no
	// copying goroutine inside exec, and Wait does not wait for output.
	if bufs.grow {
		growPipe(outW)
		growPipe(errW)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	if inR != nil {
		cmd.Stdin = inR
	}
	err = r.applyLimits(p, c.Limits)
	if err == nil {
		err = p.startCmd()
		closeCgroupFD(cmd)
	}
	if err != nil {
		cancelTimeout()
		closeAll(outR, outW, errR, errW, inR)
		p.abortStdin()
		endLeaf(p.leaf)
		return nil, startError(c, err)
	}
	closeAll(outW, errW, inR) // the child has its copies; EOF comes when it and its children close theirs
	r.oom.adjust(cmd.Process.Pid, r.oomScoreAdj())
	r.started(p)
	if c.OnStart != nil {
		c.OnStart(p)
	}
	if c.Timeout > 0 {
		timer := time.AfterFunc(c.Timeout, cancelTimeout)
		cancel := cancelTimeout
		cancelTimeout = func() { timer.Stop(); cancel() }
	}
	drain := r.drainDelay()
	p.readers[0] = &pipeReader{f: outR, bufs: bufs, consume: stdout, drainDelay: drain}
	p.readers[1] = &pipeReader{f: errR, bufs: bufs, consume: stderr, drainDelay: drain}
	readers := make(chan struct{}, 2)
	go p.readers[0].run(readers)
	go p.readers[1].run(readers)
	p.startStdin(ctx, c.Input)
	go p.wait(ctx, cancelTimeout, readers)
	return p, nil
}

// startCmd starts p.cmd, and sets its rlimits if ptrace is to (see
// applyLimits).
func (p *Process) startCmd() error {
	if p.rlimits != nil {
		return p.startTraced(p.rlimits)
	}
	return p.startUntraced()
}

func (p *Process) startUntraced() error {
	if p.runner.Reaper != nil {
		return p.runner.Reaper.Start(p.cmd)
	}
	return p.cmd.Start()
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}
