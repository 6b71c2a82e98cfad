package executor

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// TTYCommand is a program to start on a new pseudo-terminal.
type TTYCommand struct {
	// Args is the program (an absolute path, or a name looked up in the
	// agent's PATH) and its arguments; Args[0] is also the program's
	// argv[0]. It must not be empty.
	Args []string
	// Dir, Env, BaseEnv, User and OnStart mean what they mean on Command:
	// a session's terminal starts in its directory, with its environment,
	// as its user, and is tracked by it.
	Dir     string
	Env     map[string]string
	BaseEnv []string
	User    *User
	OnStart func(*Process)
	// Cols and Rows are the terminal's initial size; zero means 80 and 24.
	Cols, Rows uint16
	// Limits bound what the terminal's processes may use, as on Command.
	Limits Limits
}

// command is c as a Command, for what the two share: the environment, the
// credential and the checks of both.
func (c TTYCommand) command() Command {
	return Command{Dir: c.Dir, Env: c.Env, BaseEnv: c.BaseEnv, User: c.User, Limits: c.Limits}
}

// check returns an error wrapping ErrInvalidCommand or ErrInvalidDir if c
// cannot be started, before anything is.
func (c TTYCommand) check() error {
	if len(c.Args) == 0 || c.Args[0] == "" {
		return fmt.Errorf("%w: no program to run", ErrInvalidCommand)
	}
	for _, a := range c.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("%w: an argument contains a NUL byte", ErrInvalidCommand)
		}
		if len(a) >= maxArgStrlen {
			return fmt.Errorf("%w: an argument is %d bytes, over the kernel's limit of %d bytes for one argument",
				ErrInvalidCommand, len(a), maxArgStrlen-1)
		}
	}
	return Check(c.command())
}

// StartTTY starts c on a new pseudo-terminal, as the leader of a session
// of its own whose controlling terminal it is (so its process group is
// its pid, and an interactive shell puts each job in a group of its own
// within that session). It returns the process and the terminal's master
// side, from which the caller reads the program's output and to which it
// writes its input; the caller closes the master once it has read to the
// end (EIO once no process holds the terminal open). Closing it hangs the
// terminal up: the processes still on it get SIGHUP.
//
// The process counts against MaxRunning until it has been waited for, is
// started through the Reaper when there is one, and its oom_score_adj is
// raised as for any command. Its group is known to KillAll; the other
// groups of its session are not (see SignalSession). Its Result never has
// TimedOut or Truncated set. Errors are Start's.
func (r *Runner) StartTTY(c TTYCommand) (*Process, *os.File, error) {
	if err := c.check(); err != nil {
		return nil, nil, err
	}
	if err := r.CheckLimits(c.Limits); err != nil {
		return nil, nil, err
	}
	if err := r.acquire(); err != nil {
		return nil, nil, err
	}
	p, master, err := r.startTTY(c)
	if err != nil {
		r.release(nil)
		return nil, nil, err
	}
	return p, master, nil
}

// startTTY starts c, whose slot acquire has taken; see StartTTY.
func (r *Runner) startTTY(c TTYCommand) (*Process, *os.File, error) {
	master, tty, err := openPTY()
	if err != nil {
		return nil, nil, fmt.Errorf("opening a pseudo-terminal: %w", err)
	}
	// The child has its own copies once started; the agent keeps only
	// the master, so that the master reads EIO once the session is gone.
	defer tty.Close()
	cols, rows := c.Cols, c.Rows
	if cols == 0 {
		cols = 80
	}
	if rows == 0 {
		rows = 24
	}
	if err := Resize(master, cols, rows); err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("sizing the pseudo-terminal: %w", err)
	}
	cmd := exec.Command(c.Args[0], c.Args[1:]...)
	cmd.Dir = c.Dir
	cc := c.command()
	cmd.Env = r.env(cc)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	// A session of its own with the terminal as its controlling terminal
	// (Ctty 0: the child's stdin). It is then its own group's leader
	// already: Setpgid on a session leader fails with EPERM.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Credential: cc.credential()}
	p := &Process{cmd: cmd, runner: r, done: make(chan struct{}), tty: true}
	err = r.applyLimits(p, c.Limits)
	if err == nil {
		err = p.startCmd()
		closeCgroupFD(cmd)
	}
	if err != nil {
		master.Close()
		endLeaf(p.leaf)
		return nil, nil, startError(cc, err)
	}
	r.oom.adjust(cmd.Process.Pid, r.oomScoreAdj())
	r.started(p)
	if c.OnStart != nil {
		c.OnStart(p)
	}
	go p.waitTTY()
	return p, master, nil
}

// waitTTY is the only caller of cmd.Wait for a process started by
// StartTTY, whose output its caller reads from the master: there is no
// pipe to drain here. It runs in its own goroutine; it ends when the
// session leader has exited.
func (p *Process) waitTTY() {
	_ = p.cmd.Wait() // the exit status is read from ProcessState below
	p.reaped.Store(true)
	if p.runner.Reaper != nil {
		p.runner.Reaper.Done(p.cmd.Process.Pid)
	}
	p.res = result(p.cmd.ProcessState, false)
	p.res.Limit = limitFired(p.res, p.limits, endLeaf(p.leaf), cpuTime(p.cmd.ProcessState))
	p.runner.release(p)
	close(p.done)
}

// openPTY opens a new pseudo-terminal and returns its master, served by
// Go's poller, and its slave (tty).
//
// pty.Open's master is in blocking mode (its ioctls go through File.Fd,
// which sets it): a Read would then hold a thread and ignore deadlines,
// and closing the file would not end it, so the reader of a terminal
// could never be stopped. The master returned here is a non-blocking
// duplicate, so its reads and writes honour deadlines and end when it is
// closed; its ioctls go through SyscallConn (see control), never Fd.
func openPTY() (master, tty *os.File, err error) {
	m, tty, err := pty.Open()
	if err != nil {
		return nil, nil, err
	}
	defer m.Close()
	fd, err := unix.FcntlInt(m.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err == nil {
		if err = unix.SetNonblock(fd, true); err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		tty.Close()
		return nil, nil, err
	}
	return os.NewFile(uintptr(fd), m.Name()), tty, nil
}

// control calls fn with master's descriptor, without taking it out of
// non-blocking mode as File.Fd would.
func control(master *os.File, fn func(fd int) error) error {
	sc, err := master.SyscallConn()
	if err != nil {
		return err
	}
	var fnErr error
	if err := sc.Control(func(fd uintptr) { fnErr = fn(int(fd)) }); err != nil {
		return err
	}
	return fnErr
}

// Resize sets the window size of the terminal whose master is master (as
// StartTTY returns it); the kernel sends SIGWINCH to the terminal's
// foreground process group.
func Resize(master *os.File, cols, rows uint16) error {
	return control(master, func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Col: cols, Row: rows})
	})
}

// ForegroundGroup returns the foreground process group of the terminal
// whose master is master: the job that a typed Ctrl-C would interrupt.
func ForegroundGroup(master *os.File) (int, error) {
	var pgrp int
	err := control(master, func(fd int) error {
		var err error
		pgrp, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP)
		return err
	})
	return pgrp, err
}
