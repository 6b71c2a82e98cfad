package executor

import (
	"sync"
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
	// Ptrace makes the rlimits of a command be set without the helper's
	// second exec: the command is started traced, so that it stops right
	// after its execve, before its first instruction; the agent sets them
	// with prlimit and detaches (see startTraced). Set it where
	// ProbePtrace says this works. A command that prlimit could not serve
	// (see byPtrace) still goes through Helper.
	Ptrace bool
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
	caps      capsReader       // reads the agent's own capabilities once
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
