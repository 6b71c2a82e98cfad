// Package executor runs shell commands: each in its own process group, with
// both pipes drained to the end whatever they hold, killed as a group when
// its context ends or its timeout passes, and with every wait bounded.
package executor

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sandbox-executor/sandbox-executor/cgroups"
)

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
	// DrainDelay bounds how long a command's pipes are still read after
	// its shell has exited, for background children that keep them open:
	// time spent waiting on an empty pipe, or reading what those children
	// wrote after the exit. Output written before the exit is always read
	// in full, however long that takes; see pipeReader. If zero, 2 s.
	DrainDelay time.Duration
	// Reaper, if set, starts every command, so that it can reap orphaned
	// zombies without ever taking a child this Runner waits for. Set it
	// when the agent runs as PID 1.
	Reaper *Reaper
	// MaxRunning caps the commands running at once, Run and Start alike:
	// past it they return ErrBusy. A command counts from its start until
	// its output has been read and it has been waited for. If zero, an
	// eighth of the open-file limit, between 16 and 2,000; see
	// defaultMaxRunning.
	MaxRunning int
	// Privileged reports whether commands may run as another user
	// (Command.User). If nil, they may when the agent's effective uid is
	// 0; tests set it.
	Privileged func() bool
	// MaxInput bounds the bytes of Command.Input that the agent holds for
	// all commands together: each command's input counts from its start
	// until it has been written to the pipe (or the command closed its
	// stdin, or ended). Past it, Start and Run return an error wrapping
	// ErrInputBudget. If zero, 256 MiB.
	MaxInput int64
	// OOMScoreAdj is how much higher than the agent's own oom_score_adj
	// each command's is set (at most 1000), so that when memory runs out
	// the kernel kills a command before it kills the agent. If zero, 500;
	// if negative, commands keep the agent's.
	OOMScoreAdj int
	// Helper is the path of the agent's own binary, run as the rlimit
	// helper (see RunHelper) for a command with Limits.CPUSeconds,
	// FileSizeBytes or OpenFiles. If empty, such a command is refused
	// with ErrLimitsUnsupported.
	Helper string
	// Cgroups makes the cgroup leaf of a command with Limits.MemoryBytes
	// or Pids. If nil, such a command is refused with
	// ErrLimitsUnsupported.
	Cgroups *cgroups.Manager

	// The pipe readers' buffers are reused: a /run of `true` would
	// otherwise allocate two of them, most of its garbage.
	rawBufs   sync.Pool // *[]byte of readSize, for Run
	lineBufs  sync.Pool // *[]byte of maxLine()+readSize, for Start
	stdinBufs sync.Pool // *[]byte of stdinBufSize, for WriteStdin
	// streamBufs are StartStream's, of streamReadSize.
	streamBufs sync.Pool

	// mu guards running, inputHeld, groups and pruneAt.
	mu        sync.Mutex
	running   int              // commands started and not yet finished
	inputHeld int64            // bytes of Command.Input not yet written; see MaxInput
	groups    map[int]*Process // process groups that may have members, by pgid: the command that leads it
	pruneAt   int              // len(groups) at which the next start prunes it
	oom       oomAdjuster      // reads the agent's own oom_score_adj once
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

func (r *Runner) oomScoreAdj() int {
	if r.OOMScoreAdj == 0 {
		return 500
	}
	return r.OOMScoreAdj
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
	// Truncated is true if output was cut: background children of the
	// shell were still writing DrainDelay after it exited, and what they
	// wrote from then on was not read. (For Run, also if a stream was
	// longer than MaxOutput; see Output.) Output the command wrote before
	// its shell exited is never cut.
	Truncated bool
	// Limit is the reason (ReasonCPULimit ...) of the limit of
	// Command.Limits that ended the command, or empty if none did.
	Limit string
}

// Process is a started command.
type Process struct {
	cmd      *exec.Cmd
	runner   *Runner
	readers  [2]*pipeReader // stdout, stderr
	stdin    *stdinPipe     // nil if stdin is /dev/null
	done     chan struct{}  // closed by wait once res is set
	res      Result
	timedOut atomic.Bool   // set by cmd.Cancel when the timeout, not the caller, ended the command
	reaped   atomic.Bool   // set by wait once cmd.Wait has returned: the group's number may be reused once the group is empty
	tty      bool          // started by StartTTY: it leads a session, whose jobs have groups of their own
	limits   Limits        // Command.Limits
	leaf     *cgroups.Leaf // the command's cgroup leaf, if its limits need one; removed by wait
}

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
	p, err := r.start(ctx, c, buffers{&r.rawBufs, readSize}, cs.consumer(Stdout), cs.consumer(Stderr))
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
	if bufs.pool == &r.streamBufs {
		// StartStream's readers take large chunks: its pipes hold
		// several, so that the command writes on while one is handed over.
		growPipe(outW)
		growPipe(errW)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	if inR != nil {
		cmd.Stdin = inR
	}
	leaf, err := r.applyLimits(cmd, c.Limits)
	if err == nil {
		p.limits, p.leaf = c.Limits, leaf
		err = p.startCmd()
		closeCgroupFD(cmd)
	}
	if err != nil {
		cancelTimeout()
		closeAll(outR, outW, errR, errW, inR)
		p.abortStdin()
		endLeaf(leaf)
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

func (p *Process) startCmd() error {
	if p.runner.Reaper != nil {
		return p.runner.Reaper.Start(p.cmd)
	}
	return p.cmd.Start()
}

func (r *Runner) env(c Command) []string {
	base, extra := c.BaseEnv, c.Env
	if base == nil {
		base = r.baseEnv()
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
// ends when the shell has exited and both pipe readers have finished (see
// pipeReader for how long they read after the exit). It owns the two
// pipeReader goroutines and closes their pipes, and the stdin writer's.
func (p *Process) wait(ctx context.Context, cancelTimeout context.CancelFunc, readers <-chan struct{}) {
	defer cancelTimeout()
	_ = p.cmd.Wait() // the exit status is read from ProcessState below
	p.reaped.Store(true)
	if p.runner.Reaper != nil {
		p.runner.Reaper.Done(p.cmd.Process.Pid)
	}
	exit := time.Now()
	for _, pr := range p.readers {
		pr.exited(exit)
	}

	ctxDone := ctx.Done()
	for n := 0; n < 2; {
		select {
		case <-readers:
			n++
		case <-ctxDone:
			// Cancelled or timed out while children still hold the pipes.
			_, _ = signalLeftGroup(p.cmd.Process.Pid, syscall.SIGKILL)
			ctxDone = nil
		}
	}
	closeAll(p.readers[0].f, p.readers[1].f)
	p.endStdin()

	p.res = result(p.cmd.ProcessState, p.timedOut.Load())
	p.res.Truncated = p.readers[0].truncated || p.readers[1].truncated
	p.res.Limit = limitFired(p.res, p.limits, endLeaf(p.leaf), cpuTime(p.cmd.ProcessState))
	p.runner.release(p)
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

// Signal sends sig to the command's whole process group. The group
// outlives the shell while background children it left are in it (`npm
// start &`): after the command has finished, Signal still reaches them, and
// returns ErrFinished, sending nothing, only once the group is empty. A
// group number the system has reused for someone else's group is never
// signalled (see signalLeftGroup). Children that left the group on purpose
// (setsid, setpgid) are out of reach.
func (p *Process) Signal(sig syscall.Signal) error {
	pgid := p.cmd.Process.Pid
	if !p.reaped.Load() {
		// The shell is not reaped, so the group's number is still ours.
		// (Between the reaping inside cmd.Wait and the flag, the number
		// could only be someone else's if the system went through every
		// pid in those microseconds.)
		return killGroup(pgid, sig)
	}
	sent, err := signalLeftGroup(pgid, sig)
	if err == nil && !sent {
		return ErrFinished
	}
	return err
}

// Kill sends SIGKILL to everything of the command's that is still ours:
// its process group (what a finished command left there included), or,
// for a command started by StartTTY, its whole session (see
// SignalSession). It returns ErrFinished if nothing was left.
func (p *Process) Kill() error {
	if !p.tty {
		return p.Signal(syscall.SIGKILL)
	}
	_, err := p.SignalSession(syscall.SIGKILL)
	return err
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}
