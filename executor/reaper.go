package executor

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
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
type Reaper struct {
	// MinInterval is the least time between two scans of /proc, which
	// bounds the cost of a burst of exits. If zero, 50 ms.
	MinInterval time.Duration

	// mu is held while a child is started and registered, and while
	// zombies are reaped. It guards ours.
	mu   sync.Mutex
	ours map[int]struct{} // children that os/exec will wait for
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

// Done forgets pid, a child whose cmd.Wait has returned.
func (r *Reaper) Done(pid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.ours, pid)
}

// Run reaps orphaned zombies each time a child exits, until ctx ends.
//
// Run runs in its own goroutine, started by whoever created the Reaper; it
// ends when ctx ends.
func (r *Reaper) Run(ctx context.Context) {
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGCHLD)
	defer signal.Stop(sigc)
	interval := r.MinInterval
	if interval <= 0 {
		interval = 50 * time.Millisecond
	}
	for {
		r.Reap()
		select {
		case <-sigc:
		case <-ctx.Done():
			return
		}
		// Signals are coalesced: one scan after a pause covers a burst.
		select {
		case <-time.After(interval):
		case <-ctx.Done():
			return
		}
	}
}

// Reap waits for every zombie child of this process that it did not
// start, and returns how many it reaped.
func (r *Reaper) Reap() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	self := os.Getpid()
	n := 0
	for _, pid := range zombieChildren(self) {
		if _, ok := r.ours[pid]; ok {
			continue
		}
		var ws syscall.WaitStatus
		for {
			got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err == nil && got == pid {
				n++
			}
			break
		}
	}
	return n
}

// zombieChildren returns the processes in /proc whose parent is ppid and
// that are zombies.
func zombieChildren(ppid int) []int {
	dir, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer dir.Close()
	names, _ := dir.Readdirnames(-1)
	var pids []int
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // it ended meanwhile
		}
		if state, parent, ok := parseStat(b); ok && state == 'Z' && parent == ppid {
			pids = append(pids, pid)
		}
	}
	return pids
}

// parseStat returns the state and parent pid from the text of
// /proc/<pid>/stat. The command name, in parentheses, may itself contain
// spaces and parentheses, so the fields are counted from the last ')'.
func parseStat(b []byte) (state byte, ppid int, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, false
	}
	fields := bytes.Fields(b[i+2:])
	if len(fields) < 2 || len(fields[0]) != 1 {
		return 0, 0, false
	}
	ppid, err := strconv.Atoi(string(fields[1]))
	if err != nil {
		return 0, 0, false
	}
	return fields[0][0], ppid, true
}
