package executor

import (
	"errors"
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
	// an environment variable whose name is empty or holds '=', or a
	// command or environment over the kernel's size limits (E2BIG).
	ErrInvalidCommand = errors.New("invalid command")
	// ErrNotPrivileged is returned by Start, Run and LookupUser when a
	// command is to run as another user (Command.User) but the agent may
	// not switch users: it does not run as root.
	ErrNotPrivileged = errors.New("running a command as another user needs an agent running as root")
	// ErrBusy is returned by Start and Run when Runner.MaxRunning commands
	// are running already, or the system refused a new process for lack
	// of resources (fork's EAGAIN). Nothing was started; trying again
	// later may succeed.
	ErrBusy = errors.New("too many commands running")
	// ErrInputBudget is returned by Start and Run when the Command.Input
	// of the commands that have not read theirs yet, with c's, would pass
	// Runner.MaxInput; the error text names the budget and its size.
	// Nothing was started; trying again once they have read it may
	// succeed.
	ErrInputBudget = errors.New("input budget exhausted")
)

// Command is one shell command to run.
type Command struct {
	Cmd string // run as Shell -c Cmd
	// Argv, if not nil, is run instead of Cmd, with no shell: Argv[0] is
	// looked up in the PATH of the command's own environment, and the
	// program gets exactly these arguments. A program not found (or not
	// executable) fails as a shell reports it: its message on stderr,
	// status 127 (or 126). Exactly one of Cmd and Argv is set; see
	// ShellQuote for running an Argv through a shell.
	Argv []string
	Dir  string            // working directory; empty means the agent's own
	Env  map[string]string // added to BaseEnv, else to Runner.Env; nil adds nothing
	// BaseEnv, if not nil, is the whole environment Env is added to, in
	// place of Runner.Env: a session's. See env.go.
	BaseEnv []string
	// User, if not nil, runs the command as that user, with its groups.
	// Its HOME, USER and LOGNAME are the caller's to set (User.Env).
	User *User
	// OnStart, if set, is called with the process as soon as it has
	// started, before Start or Run returns; a session uses it to know its
	// process groups.
	OnStart func(*Process)
	// Timeout, if positive, is how long the command may run before its
	// process group is killed and it ends with ExitTimedOut.
	Timeout time.Duration
	// Input, if not empty, is written to the command's stdin, which is
	// then closed unless Stdin is set. Empty, and without Stdin, stdin is
	// /dev/null. See stdin.go.
	Input string
	// Stdin keeps the command's stdin a pipe open after Input, for
	// Process.WriteStdin, until Process.CloseStdin or the command's end.
	Stdin bool
	// Limits bound what the command may use; see limits.go. The zero
	// value sets none.
	Limits Limits
}
