package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

const (
	defaultKillGrace = 5 * time.Second
	// signalSettle is how long a cancelled ctx waits for the signal that
	// may have cancelled it. A signal reaches both main's NotifyContext
	// and the supervisor's channel, in no defined order; waiting a moment
	// forwards a real SIGINT as itself and only once, and a ctx cancelled
	// by other means as SIGTERM.
	signalSettle = 100 * time.Millisecond
)

// mainCommand is the sandbox's own main command, a child of the agent in
// a process group of its own.
type mainCommand struct {
	cmd   *exec.Cmd
	log   zerolog.Logger
	grace time.Duration
	done  chan struct{} // closed by wait once code is set
	code  int           // the exit code, 128+signal if a signal ended it
	// reaper, if not nil, started cmd and must be told when it is waited for.
	reaper *executor.Reaper
}

// startMain starts argv (no shell) with the agent's stdio and the
// environment of runner's commands, which lacks the agent's credentials.
// The command is given the signals that arrive on sigc; when ctx ends it
// gets SIGTERM, unless SIGTERM or SIGINT came first, and its process
// group is killed if it has not exited killGrace later. The two
// goroutines it starts are counted in wg. If runner has a Reaper, the
// Reaper starts the command.
func (o options) startMain(ctx context.Context, wg *sync.WaitGroup, sigc <-chan os.Signal, argv []string,
	runner *executor.Runner, stderr io.Writer, log zerolog.Logger) (*mainCommand, error) {
	reaper := runner.Reaper
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = runner.Environ()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = o.stdin, o.out(), stderr
	if cmd.Stdin == nil {
		cmd.Stdin = os.Stdin
	}
	// A group of its own: a terminal's Ctrl-C reaches the command only
	// through the agent, and the final SIGKILL reaches its children too.
	// (So, from a terminal, the command is not in the foreground group: it
	// cannot read the terminal.)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Only for stdio that is not an *os.File (tests): exec then copies in
	// goroutines, which a grandchild holding the pipe must not keep alive.
	cmd.WaitDelay = time.Second
	start := cmd.Start
	if reaper != nil {
		start = func() error { return reaper.Start(cmd) }
	}
	if err := start(); err != nil {
		return nil, fmt.Errorf("starting the main command: %w", err)
	}
	m := &mainCommand{cmd: cmd, log: log, grace: o.killGrace, done: make(chan struct{}), reaper: reaper}
	if m.grace <= 0 {
		m.grace = defaultKillGrace
	}
	log.Info().Int("pid", cmd.Process.Pid).Msg("main command started")
	wg.Add(2)
	go m.wait(wg)
	go m.supervise(ctx, wg, sigc)
	return m, nil
}

// wait is the only caller of cmd.Wait.
//
// wait runs in its own goroutine; it ends when the command has exited.
func (m *mainCommand) wait(wg *sync.WaitGroup) {
	defer wg.Done()
	_ = m.cmd.Wait() // the exit status is read from ProcessState
	if m.reaper != nil {
		m.reaper.Done(m.cmd.Process.Pid)
	}
	m.code = exitCode(m.cmd.ProcessState)
	// What the command left running in its group must not outlive it: the
	// agent exits now. The group id cannot have been reused while any
	// member lives; if none does, ESRCH is the expected answer.
	if err := syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		m.log.Warn().Err(err).Msg("killing what the main command left behind")
	}
	close(m.done)
}

// exitCode follows the shell's convention: 128+signal for a command that a
// signal ended.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return 1 // not waited for: Wait itself failed
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// supervise forwards the signals from sigc to the command, and after
// SIGTERM, SIGINT or the end of ctx gives it m.grace to exit before it
// kills the command's process group.
//
// supervise runs in its own goroutine; it ends when the command has
// exited, which the kill makes at most m.grace after ctx ends.
func (m *mainCommand) supervise(ctx context.Context, wg *sync.WaitGroup, sigc <-chan os.Signal) {
	defer wg.Done()
	ctxDone := ctx.Done()
	var settle, grace <-chan time.Time
	startGrace := func() {
		settle = nil
		if grace == nil {
			grace = time.After(m.grace)
		}
	}
	for {
		select {
		case <-m.done:
			return
		case sig := <-sigc:
			m.signal(sig)
			if sig == syscall.SIGTERM || sig == syscall.SIGINT {
				startGrace()
			}
		case <-ctxDone:
			ctxDone = nil
			if grace == nil {
				settle = time.After(signalSettle)
			}
		case <-settle:
			m.signal(syscall.SIGTERM)
			startGrace()
		case <-grace:
			grace = nil
			m.log.Warn().Float64("grace_ms", float64(m.grace.Milliseconds())).Msg("main command still running; killing its process group")
			if err := syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				m.log.Error().Err(err).Msg("killing the main command")
			}
		}
	}
}

// signal sends sig to the command itself, as a terminal or an init would.
// os.Process.Signal never reaches a process that has been waited for.
func (m *mainCommand) signal(sig os.Signal) {
	m.log.Debug().Str("signal", signalName(sig)).Msg("forwarding signal to the main command")
	if err := m.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		m.log.Warn().Err(err).Str("signal", signalName(sig)).Msg("forwarding signal to the main command")
	}
}
