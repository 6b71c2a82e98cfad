package executor

import (
	"context"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sandbox-executor/sandbox-executor/cgroups"
)

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
	rlimits  []rlimit      // set by startCmd through ptrace; nil if none, or if the helper sets them
	leaf     *cgroups.Leaf // the command's cgroup leaf, if its limits need one; removed by wait
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
