package terminals

import (
	"context"
	"errors"
	"math"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// Status is the state of a terminal, as the API names it; the words are
// those of background processes.
type Status string

// The statuses. A terminal is StatusKilled if its leader died of a signal
// sent through Kill, or exited with 128+n for such a signal n.
const (
	StatusRunning   Status = "running"
	StatusCompleted Status = "completed" // the leader exited with status 0
	StatusFailed    Status = "failed"    // exited non-zero, or died of a signal Kill did not send
	StatusKilled    Status = "killed"    // died of a signal sent through Kill
)

// FromOldest, given to Attach, starts a cursor at the oldest byte kept.
const FromOldest = math.MaxUint64

// readSize is how much the reader asks the terminal for at a time; the
// line discipline hands over at most 4 KiB per read, so this is room for
// whatever one read can bring.
const readSize = 16 << 10

// Terminal is one program running on a pseudo-terminal, the output it
// wrote (the last Options.RingBytes bytes of it), and the cursors of its
// clients.
type Terminal struct {
	ID        string
	PID       int    // the session leader's
	Command   string // the command, or the login shell's path
	StartedAt time.Time

	exec     *executor.Process
	activity func()        // Spec.OnActivity; nil: nothing to tell
	master   *os.File      // closed by finish; input, resize and signals go through it
	read     chan struct{} // closed by pump when it has read the master to its end
	done     chan struct{} // closed by finish, once the exit is recorded and every byte stored

	// in serializes input: a writer holds its one slot while it writes,
	// so the input of concurrent clients is applied one write at a time,
	// in the order they got it. A channel, not a mutex, so that a writer
	// waiting for it can give up when its context ends.
	in chan struct{}

	// mu guards everything below. Holding one lock while bytes are stored
	// and cursors woken, and while a cursor copies bytes out, is what
	// gives each cursor one stream with no gap and no duplicate.
	mu         sync.Mutex
	ring       ring
	subs       map[*Cursor]struct{}
	status     Status
	exitCode   int
	cols, rows uint16
	closed     bool   // the master is closed
	sent       uint64 // bit n-1 is set once signal n was sent by Kill while the leader ran
	leftovers  bool   // when it finished, processes of its session were still alive
}

// Info is a snapshot of a terminal for listing.
type Info struct {
	ID         string
	PID        int
	Status     Status
	Command    string
	Cols, Rows int
	ExitCode   *int // nil while running
	Clients    int  // cursors open: clients attached
}

// Info returns a snapshot of t.
func (t *Terminal) Info() Info {
	t.mu.Lock()
	defer t.mu.Unlock()
	info := Info{ID: t.ID, PID: t.PID, Status: t.status, Command: t.Command,
		Cols: int(t.cols), Rows: int(t.rows), Clients: len(t.subs)}
	if t.status != StatusRunning {
		code := t.exitCode
		info.ExitCode = &code
	}
	return info
}

// Done returns a channel that is closed once t has ended and all its
// output is stored.
func (t *Terminal) Done() <-chan struct{} { return t.done }

// ExitCode returns the leader's exit status (128+n if signal n ended it)
// once Done is closed, and -1 before.
func (t *Terminal) ExitCode() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.status == StatusRunning {
		return -1
	}
	return t.exitCode
}

// pump reads the terminal's output into the ring until the master reads
// EIO (no process holds the terminal any more), or its read deadline
// passes (set by Registry.watch once the leader has exited), or it is
// closed. It never waits for a client.
//
// pump runs in its own goroutine, one per terminal, started by
// Registry.Start; it ends as said above, and closes t.read.
func (t *Terminal) pump(wg *sync.WaitGroup) {
	defer wg.Done()
	defer close(t.read)
	buf := make([]byte, readSize)
	for {
		n, err := t.master.Read(buf)
		if n > 0 {
			t.store(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// store appends output to the ring and wakes the cursors.
func (t *Terminal) store(p []byte) {
	t.mu.Lock()
	t.ring.write(p)
	t.wakeLocked()
	t.mu.Unlock()
}

// wakeLocked tells every cursor that something changed. A cursor that has
// not taken its last wake-up needs no second one, so the send never
// blocks. t.mu must be held.
func (t *Terminal) wakeLocked() {
	for c := range t.subs {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// finish closes the master, hanging the terminal up, and records how the
// leader ended. pump must have ended.
func (t *Terminal) finish(res executor.Result) {
	t.mu.Lock()
	t.closed = true
	_ = t.master.Close()
	t.exitCode = res.Code
	// One scan of /proc, so that Close skips the sessions that are empty
	// (a session gains no members once it has none); in the same
	// critical section as the status, which Close reads with it.
	n, _ := t.exec.SignalSession(0)
	t.leftovers = n > 0
	switch {
	case t.diedOfSentLocked(res):
		t.status = StatusKilled
	case res.Code == 0:
		t.status = StatusCompleted
	default:
		t.status = StatusFailed
	}
	close(t.done)
	t.wakeLocked()
	t.mu.Unlock()
}

// diedOfSentLocked reports whether res says the leader died of a signal
// sent by Kill. t.mu must be held.
func (t *Terminal) diedOfSentLocked(res executor.Result) bool {
	sig := res.Signal
	if sig == 0 && res.Code > 128 {
		sig = syscall.Signal(res.Code - 128)
	}
	return sig >= 1 && sig <= 64 && t.sent&(1<<(sig-1)) != 0
}

// Write types p into the terminal: the program reads it as input. Input
// from concurrent writers is applied one Write at a time, in the order
// they get their turn. A program that reads no input fills the terminal's
// input buffer, and Write then waits, until ctx ends. It returns an error
// wrapping ErrNotRunning once the terminal has ended.
func (t *Terminal) Write(ctx context.Context, p []byte) (int, error) {
	select {
	case t.in <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { <-t.in }()
	// The deadline is the master's, shared by every writer: it is set
	// only while this one holds the turn, and cleared before it is given
	// back.
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = t.master.SetWriteDeadline(time.Now())
		close(fired)
	})
	n, err := t.master.Write(p)
	if n > 0 {
		t.used()
	}
	if !stop() {
		<-fired
		_ = t.master.SetWriteDeadline(time.Time{})
	}
	switch {
	case err == nil:
		return n, nil
	case errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil:
		return n, ctx.Err()
	case errors.Is(err, os.ErrClosed), errors.Is(err, syscall.EIO):
		return n, t.notRunning()
	}
	return n, err
}

// used tells t's Spec.OnActivity, if any, that a client used t. No lock
// of t may be held.
func (t *Terminal) used() {
	if t.activity != nil {
		t.activity()
	}
}

// notRunning returns an error wrapping ErrNotRunning that names t's
// status.
func (t *Terminal) notRunning() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return notRunning(t.status)
}

// Resize sets the terminal's size; the program gets SIGWINCH. Each of
// cols and rows must be positive.
func (t *Terminal) Resize(cols, rows uint16) (err error) {
	defer func() { // after the unlock below
		if err == nil {
			t.used()
		}
	}()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.status != StatusRunning {
		return notRunning(t.status)
	}
	if err := executor.Resize(t.master, cols, rows); err != nil {
		return err
	}
	t.cols, t.rows = cols, rows
	return nil
}

// Signal sends sig to the terminal's foreground process group, as typing
// the key that sends it would: the job running in an interactive shell,
// or the shell itself at its prompt.
func (t *Terminal) Signal(sig syscall.Signal) (err error) {
	defer func() { // after the unlock below
		if err == nil {
			t.used()
		}
	}()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.status != StatusRunning {
		return notRunning(t.status)
	}
	pgrp, err := executor.ForegroundGroup(t.master)
	if err != nil || pgrp <= 0 {
		pgrp = t.PID // no foreground group: the leader's
	}
	// The foreground group is one of this terminal's session, which
	// cannot be reused while the terminal is open.
	if err := syscall.Kill(-pgrp, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// kill sends sig to every process of t's session. If the leader was
// running, it records sig, so that t is StatusKilled if it dies of it.
// If the leader had already exited but left processes in its session,
// they get sig and exited is true. If nothing is left, it returns an
// error wrapping ErrNotRunning.
func (t *Terminal) kill(sig syscall.Signal) (exited bool, err error) {
	t.mu.Lock()
	select {
	case <-t.exec.Done():
		exited = true
	default:
	}
	// Signalled before the master is closed (finish waits for the lock
	// and for the reader), so the processes die with their terminal
	// still theirs.
	_, err = t.exec.SignalSession(sig)
	if err == nil && !exited && sig >= 1 && sig <= 64 {
		t.sent |= 1 << (sig - 1)
	}
	t.mu.Unlock()
	if errors.Is(err, executor.ErrFinished) {
		<-t.done // the leader is gone; finish is about to run, if it has not
		return false, t.notRunning()
	}
	return exited, err
}

// releaseOutput drops t's retained output, for the finished-terminal
// bound; cursors learn what they missed.
func (t *Terminal) releaseOutput() {
	t.mu.Lock()
	t.ring.release()
	t.wakeLocked()
	t.mu.Unlock()
}

// outputBytes returns the memory t's retained output holds.
func (t *Terminal) outputBytes() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ring.footprint()
}
