// Package terminals keeps the agent's terminals: programs running on a
// pseudo-terminal of their own (an interactive shell, by default). Each
// keeps its recent output in a byte ring addressed by offset, which any
// number of clients read through cursors without ever holding the program
// up, and takes input from any of them, one write at a time. A terminal
// lives on with no client attached; finished ones stay listed, within
// bounds.
package terminals

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/internal/finished"
	"github.com/sandbox-executor/sandbox-executor/internal/waitgroup"
)

var (
	// ErrNotFound is returned for an id the registry does not know.
	ErrNotFound = errors.New("terminal not found")
	// ErrNotRunning is returned for a terminal that has ended (and, for
	// Kill, left nothing running in its session); the error text names
	// its status.
	ErrNotRunning = errors.New("terminal is not running")
	// ErrClosed is returned by Start after Close.
	ErrClosed = errors.New("terminal registry closed")
	// ErrTooMany is returned by Start while Options.MaxRunning terminals
	// run; the error text names the limit.
	ErrTooMany = errors.New("too many running terminals")
	// ErrOffset is returned by Attach for an offset past the end of the
	// output.
	ErrOffset = errors.New("offset out of range")
)

func notFound(id string) error       { return fmt.Errorf("%w: %s", ErrNotFound, id) }
func notRunning(status Status) error { return fmt.Errorf("%w (status: %s)", ErrNotRunning, status) }

// Options bound what a Registry keeps. Zero fields take the defaults,
// which small accessors (ringBytes and so on) supply when they are read:
// the Options a caller wrote stay as written.
type Options struct {
	// RingBytes is how much output each terminal keeps for clients that
	// attach or resume later. If zero, 1 MiB.
	RingBytes int
	// MaxRunning is how many terminals may run at once; past it Start
	// returns an error wrapping ErrTooMany. Each holds up to RingBytes of
	// output, a pseudo-terminal and three goroutines. If zero, 64.
	MaxRunning int
	// MaxFinished is how many finished terminals stay listed; past it,
	// the ones that finished first are forgotten. If zero, 100.
	MaxFinished int
	// MaxFinishedBytes bounds the output kept by all finished terminals
	// together; past it, the ones that finished first lose their output
	// but stay listed. If zero, 16 MiB.
	MaxFinishedBytes int
	// DrainDelay is how long a terminal's output is still read after its
	// leader has exited, while other processes keep the terminal open (a
	// background job): then the terminal is hung up and ends. If zero,
	// 1 s.
	DrainDelay time.Duration
}

func (o Options) ringBytes() int {
	if o.RingBytes <= 0 {
		return 1 << 20
	}
	return o.RingBytes
}

func (o Options) maxRunning() int {
	if o.MaxRunning <= 0 {
		return 64
	}
	return o.MaxRunning
}

func (o Options) maxFinished() int {
	if o.MaxFinished <= 0 {
		return 100
	}
	return o.MaxFinished
}

func (o Options) maxFinishedBytes() int {
	if o.MaxFinishedBytes <= 0 {
		return 16 << 20
	}
	return o.MaxFinishedBytes
}

func (o Options) drainDelay() time.Duration {
	if o.DrainDelay <= 0 {
		return time.Second
	}
	return o.DrainDelay
}

// Spec is a terminal to start. It is the seam through which callers (the
// API, sessions) say what runs, where and with what environment.
type Spec struct {
	// Cmd, if not empty, runs as the runner's Shell -c Cmd. If empty, the
	// login shell runs interactively: $SHELL (from Env, else the agent's
	// environment), else /bin/bash if present, else /bin/sh.
	Cmd string
	Dir string // working directory; empty means the agent's own
	// Env is added to BaseEnv, else to the runner's environment. TERM is
	// xterm-256color unless Env sets it.
	Env map[string]string
	// BaseEnv, User and OnStart mean what they mean on executor.Command:
	// a session's terminal gets its whole environment, its user, and is
	// tracked by it (see sessions.Registry.Background).
	BaseEnv    []string
	User       *executor.User
	OnStart    func(*executor.Process)
	Cols, Rows uint16 // initial size; zero means 80 and 24
	// OnActivity, if not nil, is called each time a client uses the
	// terminal: input written, a resize, a signal, output read through a
	// cursor. A session's terminal gets the session's Toucher, so that a
	// terminal in use keeps its session from expiring. It is called with
	// no lock of the terminal held, and must not block.
	OnActivity func()
	// Limits bound what the terminal's processes may use, as on
	// executor.Command.
	Limits executor.Limits
}

// Registry holds the terminals. Close kills those still running and
// waits for them.
type Registry struct {
	runner *executor.Runner
	opts   Options
	wg     sync.WaitGroup // one per pump and watch goroutine

	// mu guards the fields below. It is never acquired while a
	// Terminal's mu is held.
	mu       sync.Mutex
	terms    map[string]*Terminal
	order    []*Terminal              // in start order, for List
	finished finished.List[*Terminal] // in finish order, those still listed
	running  int
	closed   bool
}

// NewRegistry returns a Registry that starts terminals with runner.
func NewRegistry(runner *executor.Runner, opts Options) *Registry {
	return &Registry{runner: runner, opts: opts, terms: map[string]*Terminal{}}
}

// Start starts a terminal as s says. It outlives the request that asked
// for it: it ends by itself, by Kill, or by Close. Errors are the
// runner's (executor.ErrInvalidCommand, ErrInvalidDir, ErrBusy), or wrap
// ErrTooMany or ErrClosed.
func (r *Registry) Start(s Spec) (*Terminal, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	if limit := r.opts.maxRunning(); r.running >= limit {
		return nil, fmt.Errorf("%w (limit %d)", ErrTooMany, limit)
	}
	c := r.command(s)
	p, master, err := r.runner.StartTTY(c)
	if err != nil {
		return nil, err
	}
	t := &Terminal{
		ID:        uuid.NewString(),
		PID:       p.Pid(),
		Command:   s.Cmd,
		StartedAt: time.Now().UTC(),
		exec:      p,
		master:    master,
		read:      make(chan struct{}),
		done:      make(chan struct{}),
		in:        make(chan struct{}, 1),
		ring:      newRing(r.opts.ringBytes()),
		subs:      map[*Cursor]struct{}{},
		status:    StatusRunning,
		cols:      c.Cols,
		rows:      c.Rows,
		activity:  s.OnActivity,
	}
	if t.Command == "" {
		t.Command = c.Args[0]
	}
	r.terms[t.ID] = t
	r.order = append(r.order, t)
	r.running++
	r.wg.Add(2)
	go t.pump(&r.wg)
	go r.watch(t)
	return t, nil
}

// command returns the executor's command for s.
func (r *Registry) command(s Spec) executor.TTYCommand {
	env := make(map[string]string, len(s.Env)+1)
	env["TERM"] = "xterm-256color"
	for k, v := range s.Env {
		env[k] = v
	}
	c := executor.TTYCommand{Dir: s.Dir, Env: env, BaseEnv: s.BaseEnv, User: s.User, OnStart: s.OnStart,
		Cols: s.Cols, Rows: s.Rows, Limits: s.Limits}
	if c.Cols == 0 {
		c.Cols = 80
	}
	if c.Rows == 0 {
		c.Rows = 24
	}
	if s.Cmd != "" {
		shell := r.runner.Shell
		if shell == "" {
			shell = "/bin/sh"
		}
		c.Args = []string{shell, "-c", s.Cmd}
	} else {
		c.Args = []string{r.loginShell(s.Env, s.BaseEnv), "-i"}
	}
	return c
}

// loginShell returns $SHELL (from env, else base, else the runner's
// environment) if it is an executable file, else /bin/bash if present,
// else /bin/sh.
func (r *Registry) loginShell(env map[string]string, base []string) string {
	shell, ok := env["SHELL"]
	if !ok {
		if base == nil {
			base = r.runner.Env
		}
		if base == nil {
			base = os.Environ()
		}
		for _, kv := range base {
			if v, found := strings.CutPrefix(kv, "SHELL="); found {
				shell = v // the last one wins, as for exec
			}
		}
	}
	for _, candidate := range []string{shell, "/bin/bash"} {
		if fi, err := os.Stat(candidate); candidate != "" && err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return candidate
		}
	}
	return "/bin/sh"
}

// watch waits for t's leader to exit, gives the reader DrainDelay more to
// read what processes still holding the terminal write, then hangs the
// terminal up and records the exit.
//
// watch runs in its own goroutine, one per terminal; it ends once the
// terminal has finished (see above), which Kill and Close hasten.
func (r *Registry) watch(t *Terminal) {
	defer r.wg.Done()
	<-t.exec.Done()
	// A reader at EIO has already ended; one still reading stops at
	// the deadline (a background job holds the terminal).
	_ = t.master.SetReadDeadline(time.Now().Add(r.opts.drainDelay()))
	<-t.read
	// The slot is given back before Done is closed, so that a caller
	// who waited for one terminal to end can start another.
	r.mu.Lock()
	r.running--
	r.mu.Unlock()
	t.finish(t.exec.Wait())
	for _, old := range r.retire(t) {
		old.releaseOutput()
	}
}

// retire applies the finished-terminal bounds after t has finished, and
// returns the terminals it forgot, whose output the caller releases.
func (r *Registry) retire(t *Terminal) (forgotten []*Terminal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	forgotten = r.finished.Add(t, finished.Bounds[*Terminal]{MaxItems: r.opts.maxFinished(),
		MaxBytes: r.opts.maxFinishedBytes(), Bytes: (*Terminal).outputBytes, Release: (*Terminal).releaseOutput})
	for _, old := range forgotten {
		delete(r.terms, old.ID)
		r.order = slices.DeleteFunc(r.order, func(q *Terminal) bool { return q == old })
	}
	return forgotten
}

// Get returns the terminal with the given id, or an error wrapping
// ErrNotFound.
func (r *Registry) Get(id string) (*Terminal, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.terms[id]
	if !ok {
		return nil, notFound(id)
	}
	return t, nil
}

// List returns a snapshot of every listed terminal, in start order.
func (r *Registry) List() []Info {
	r.mu.Lock()
	terms := slices.Clone(r.order)
	r.mu.Unlock()
	infos := make([]Info, len(terms))
	for i, t := range terms {
		infos[i] = t.Info()
	}
	return infos
}

// Resize sets the size of the terminal with the given id. Errors wrap
// ErrNotFound or ErrNotRunning.
func (r *Registry) Resize(id string, cols, rows uint16) error {
	t, err := r.Get(id)
	if err != nil {
		return err
	}
	return t.Resize(cols, rows)
}

// Kill sends sig to every process of the session of the terminal with the
// given id, leader and jobs alike, before its terminal is closed. If the
// leader was running, the terminal is StatusKilled if it then dies of
// sig; for SIGKILL Kill waits, until ctx ends, for the terminal to have
// finished, so the next List shows it. If the leader had already exited
// but left processes in its session, they get sig, and exited is true.
// Errors wrap ErrNotFound, or ErrNotRunning (naming the status) if
// nothing of the session is left.
func (r *Registry) Kill(ctx context.Context, id string, sig syscall.Signal) (exited bool, err error) {
	t, err := r.Get(id)
	if err != nil {
		return false, err
	}
	if exited, err = t.kill(sig); err != nil || exited {
		return exited, err
	}
	if sig == syscall.SIGKILL {
		select {
		case <-t.done:
		case <-ctx.Done():
		}
	}
	return false, nil
}

// Close stops Start, kills the session of every running terminal (and
// what finished ones left running in theirs), and waits until they have
// finished, or until ctx ends.
func (r *Registry) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	terms := slices.Clone(r.order)
	r.mu.Unlock()
	for _, t := range terms {
		t.mu.Lock()
		skip := t.status != StatusRunning && !t.leftovers
		t.mu.Unlock()
		if !skip {
			_, _ = t.exec.SignalSession(syscall.SIGKILL) // ErrFinished for those already empty
		}
	}
	// The kill and DrainDelay make the last pump and watch end within
	// seconds, even if ctx ends first.
	return waitgroup.Wait(ctx, &r.wg)
}

// LoginShell returns the login shell a terminal without a command runs
// for env and base (see Spec.Env and Spec.BaseEnv): $SHELL if it is an
// executable file, else /bin/bash if present, else /bin/sh.
func (r *Registry) LoginShell(env map[string]string, base []string) string {
	return r.loginShell(env, base)
}
