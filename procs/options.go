package procs

import (
	"syscall"

	"github.com/rs/zerolog"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/readiness"
)

// Options bound what a Registry keeps. Zero fields take the defaults,
// which small accessors (maxLines and so on) supply when they are read:
// the Options a caller wrote stay as written.
type Options struct {
	// MaxLines is how many lines each process retains. If zero, 10,000.
	MaxLines int
	// MaxBytes bounds the memory of each process's retained lines,
	// counting 48 bytes of bookkeeping per line. If zero, 8 MiB.
	MaxBytes int
	// MaxTotalBytes bounds the retained lines of all processes together,
	// running and finished, counted as for MaxBytes plus 48 bytes for each
	// empty slot a process's ring keeps from when it held more lines. A
	// line that takes the total over it makes the processes that hold the
	// most lose their oldest lines first, down to a common level, 1/16
	// below the bound; their readers are told how many lines they missed.
	// If zero, 128 MiB: Go's heap grows to about twice its live data
	// before collecting it, so at their peak the lines cost about 256 MiB,
	// which leaves most of a 1 GiB sandbox to the commands.
	MaxTotalBytes int
	// MaxRunning is how many processes may run at once; past it Start
	// returns an error wrapping ErrTooMany. Each running process holds
	// three file descriptors (two pipes and a pidfd) and one OS thread
	// (blocked waiting for it), and Go ends the agent at 10,000 threads.
	// If zero, 1,000, or an eighth of the soft limit on open files if that
	// is lower, leaving room for connections and /run commands.
	MaxRunning int
	// MaxFinished is how many finished processes stay listed; past it,
	// the ones that finished first are forgotten. If zero, 1,000.
	MaxFinished int
	// MaxFinishedBytes bounds the retained lines of all finished
	// processes together, within MaxTotalBytes; past it, the ones that
	// finished first lose their lines but stay listed. If zero, half of
	// MaxTotalBytes.
	MaxFinishedBytes int
	// MaxPollBytes is how many of its latest output bytes a polled
	// process keeps for ReadOutput (see outRing), from its start if
	// StartPolled asked, else from its first poll. If zero, 1 MiB.
	MaxPollBytes int
	// Log gets a debug line when a process starts and when it ends. The
	// zero value, like zerolog.Nop(), discards them.
	Log zerolog.Logger
}

func (o Options) maxLines() int {
	if o.MaxLines <= 0 {
		return 10_000
	}
	return o.MaxLines
}

func (o Options) maxBytes() int {
	if o.MaxBytes <= 0 {
		return 8 << 20
	}
	return o.MaxBytes
}

func (o Options) maxPollBytes() int {
	if o.MaxPollBytes <= 0 {
		return 1 << 20
	}
	return o.MaxPollBytes
}

func (o Options) maxTotalBytes() int {
	if o.MaxTotalBytes <= 0 {
		return 128 << 20
	}
	return o.MaxTotalBytes
}

func (o Options) maxRunning() int {
	if o.MaxRunning <= 0 {
		return defaultMaxRunning()
	}
	return o.MaxRunning
}

func (o Options) maxFinished() int {
	if o.MaxFinished <= 0 {
		return 1_000
	}
	return o.MaxFinished
}

func (o Options) maxFinishedBytes() int {
	if o.MaxFinishedBytes <= 0 {
		return o.maxTotalBytes() / 2
	}
	return o.MaxFinishedBytes
}

// defaultMaxRunning returns 1,000, or an eighth of the soft limit on open
// files if that is lower.
func defaultMaxRunning() int {
	n := 1_000
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur/8 < uint64(n) {
		n = max(int(lim.Cur/8), 1)
	}
	return n
}

// StartOptions are what a background process may be given beyond its
// command. The zero value adds nothing.
type StartOptions struct {
	// Ready, if set, is probed from the start until it passes, its
	// timeout passes, or the process ends; see Process.Ready.
	Ready *readiness.Spec
	// Restart, if set, starts the process again when it ends, as the
	// policy says.
	Restart *RestartPolicy
	// Name, if not empty, names the process: 1 to 64 of A-Z a-z 0-9 . _
	// -, which no running process (or one waiting to restart) may have.
	Name string
	// Polled keeps the raw output for ReadOutput from the first byte,
	// not from the first poll.
	Polled bool
	// OnExit, if not nil, is called with how the command's last run ended
	// before its status leaves running, from the goroutine that watches
	// it: a session's command commits the session's state there.
	OnExit func(executor.Result)
	// Command is what List shows; empty, the command itself (a session's
	// foreground command is wrapped in a script nobody wrote).
	Command string
}

// StartWith is Start with o.
func (r *Registry) StartWith(c executor.Command, o StartOptions) (*Process, error) {
	p, err := r.start(c, o)
	if err != nil {
		return nil, err
	}
	// Logged before the watch starts, which logs the exit: a process that
	// ends at once is still logged as started first.
	r.opts.Log.Debug().Str("id", p.ID).Int("pid", p.PID).Str("command", logCommand(p.Command)).Msg("process started")
	go r.watch(p)
	if p.ready != nil {
		go r.probeReady(p)
	}
	return p, nil
}
