package executor

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Reaper reaps the zombies of orphaned processes. An agent that runs as
// PID 1 (a microVM's init, or a container entrypoint without --init)
// inherits every process whose parent died, such as the grandchildren of
// commands that the shell left behind; unless someone waits for them,
// their zombies fill the process table.
//
// Reaping with wait4(-1) would race os/exec, which waits for the children
// it started: a stolen exit status makes cmd.Wait fail. So a Reaper reaps
// only zombies it did not start, and every child is started through it
// (Runner.Reaper, Reaper.Start), which registers the child under the same
// lock the reaper holds while it reaps.
//
// It finds zombies with waitid(P_ALL, WNOWAIT), which looks at a zombie
// child without reaping it, and never through /proc: a PID namespace
// whose /proc is the outer one (a container run without its own /proc
// mount) shows other processes there. waitid reports one zombie at a
// time, so a zombie of one of ours, which os/exec is about to reap, hides
// the zombies behind it; Done, called once os/exec has reaped it, resumes.
type Reaper struct {
	// MinInterval is the least time between two passes started by
	// SIGCHLD, which bounds the cost of a burst of exits. If zero, 50 ms.
	MinInterval time.Duration

	// mu is held while a child is started and registered, and while
	// zombies are reaped: a zombie that is not in ours is then never one
	// that os/exec will wait for. It guards ours and blockedBy.
	mu        sync.Mutex
	ours      map[int]struct{} // children that os/exec will wait for
	blockedBy int              // the child of ours that ended the last pass; 0 if none did
}

// NewReaper returns a Reaper. Run makes it reap.
func NewReaper() *Reaper {
	return &Reaper{ours: map[int]struct{}{}}
}

// Start starts cmd and registers its process as one that os/exec will
// wait for, so that the Reaper leaves it alone. The caller must call Done
// once cmd.Wait has returned.
func (r *Reaper) Start(cmd *exec.Cmd) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	r.ours[cmd.Process.Pid] = struct{}{}
	return nil
}

// Done forgets pid, a child whose cmd.Wait has returned. If pid's zombie
// stopped the last pass, Done reaps the zombies that waited behind it.
func (r *Reaper) Done(pid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.ours, pid)
	if r.blockedBy == pid {
		r.reapLocked()
	}
}

func (r *Reaper) minInterval() time.Duration {
	if r.MinInterval <= 0 {
		return 50 * time.Millisecond
	}
	return r.MinInterval
}

// Run reaps orphaned zombies each time a child exits, until ctx ends.
//
// Run runs in its own goroutine, started by whoever created the Reaper; it
// ends when ctx ends.
func (r *Reaper) Run(ctx context.Context) {
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGCHLD)
	defer signal.Stop(sigc)
	interval := r.minInterval()
	for {
		r.Reap()
		select {
		case <-sigc:
		case <-ctx.Done():
			return
		}
		// Signals are coalesced: one pass after a pause covers a burst.
		select {
		case <-time.After(interval):
		case <-ctx.Done():
			return
		}
	}
}

// Reap waits for every zombie child of this process that it did not
// start, up to the first zombie of one of its own, and returns how many
// it reaped.
func (r *Reaper) Reap() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reapLocked()
}

// reapLocked is Reap. r.mu must be held.
func (r *Reaper) reapLocked() int {
	r.blockedBy = 0
	n := 0
	for {
		pid, err := peekZombie()
		if err != nil || pid == 0 {
			return n // ECHILD: no children at all; 0: none has exited
		}
		if _, ok := r.ours[pid]; ok {
			// os/exec will reap it, and Done will resume from there.
			r.blockedBy = pid
			return n
		}
		if reapPid(pid) {
			n++
		} else {
			return n // not waitable after all: never spin on it
		}
	}
}

// peekZombie returns the pid of a child that has exited, leaving it a
// zombie, or 0 if no child has exited.
func peekZombie() (int, error) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT|unix.WALL, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return 0, err
		}
		return siginfoPid(&info), nil
	}
}

// siginfoPid returns si_pid. x/sys/unix's Siginfo leaves the union of
// siginfo_t opaque; for SIGCHLD it starts with si_pid, at the union's
// offset: after three ints, aligned to a pointer (16 on 64-bit Linux,
// 12 on 32-bit). WNOHANG with no exited child leaves it zeroed.
func siginfoPid(info *unix.Siginfo) int {
	const ptr = unsafe.Sizeof(uintptr(0))
	const off = (3*unsafe.Sizeof(int32(0)) + ptr - 1) &^ (ptr - 1)
	return int(*(*int32)(unsafe.Add(unsafe.Pointer(info), off)))
}

// reapPid reaps the zombie pid and reports whether it did.
func reapPid(pid int) bool {
	var ws syscall.WaitStatus
	for {
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG|unix.WALL, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		return err == nil && got == pid
	}
}
