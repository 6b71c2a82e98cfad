package procs

import (
	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/readiness"
)

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
