package executor

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// defaultMaxRunning is MaxRunning's default: an eighth of the open-file
// limit, at most 2,000 and at least 16. Each running command holds three
// descriptors (two pipes and a pidfd) and, in /run_streaming, a
// connection's; an eighth leaves most of the limit to connections and file
// operations. (Go raises the soft limit to the hard one at start.) Each
// also holds a thread while it is waited for, and Go allows 10,000 threads
// in all: 2,000 leaves room for everything else.
func defaultMaxRunning() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 128
	}
	return int(min(max(lim.Cur/8, 16), 2000))
}

func (r *Runner) maxRunning() int {
	if r.MaxRunning <= 0 {
		return defaultMaxRunning()
	}
	return r.MaxRunning
}

// Running returns how many commands are running (as MaxRunning counts
// them: until their output has been read and they have been waited for)
// and the cap on them, MaxRunning or its default.
func (r *Runner) Running() (running, limit int) {
	limit = r.maxRunning()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running, limit
}

// acquire takes a running slot, or returns an error wrapping ErrBusy.
func (r *Runner) acquire() error {
	limit := r.maxRunning()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running >= limit {
		return fmt.Errorf("%w (limit %d)", ErrBusy, limit)
	}
	r.running++
	return nil
}

// started records the group of p, a command just started, among the
// groups that may have members.
func (r *Runner) started(p *Process) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.groups == nil {
		r.groups = map[int]*Process{}
	}
	if len(r.groups) >= r.pruneAt {
		r.pruneLocked()
	}
	r.groups[p.Pid()] = p
}

// pruneLocked forgets the groups of finished commands that no longer have
// members, and sets when to prune next: pruning when the set has doubled
// keeps its cost per start constant and the set within twice the live
// groups. r.mu must be held.
func (r *Runner) pruneLocked() {
	for pgid, p := range r.groups {
		if p.reaped.Load() && !groupAlive(pgid) {
			delete(r.groups, pgid)
		}
	}
	r.pruneAt = max(64, 2*len(r.groups))
}

// release gives back the slot of a command that has ended and whose output
// has been read, or (p nil) that never started. Its group is kept while
// background children the shell left are in it.
func (r *Runner) release(p *Process) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running--
	if p == nil {
		return
	}
	// The entry may be another command's if the number was reused.
	if pgid := p.Pid(); r.groups[pgid] == p && !groupAlive(pgid) {
		delete(r.groups, pgid)
	}
}

// KillAll sends SIGKILL to every process group this Runner started that
// still has members: running commands, and what finished commands left
// behind (`sleep 100 &`), whether they were started by Run or Start. It
// returns how many groups it signalled. The agent calls it at shutdown.
// Processes that moved to a group or session of their own (setsid,
// setpgid) escape it.
func (r *Runner) KillAll() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for pgid, p := range r.groups {
		if !p.reaped.Load() {
			if killGroup(pgid, syscall.SIGKILL) == nil {
				n++
			}
			continue
		}
		if sent, _ := signalLeftGroup(pgid, syscall.SIGKILL); sent {
			n++
		}
	}
	r.pruneLocked()
	return n
}

// groupAlive reports whether pgid, the group of a command whose shell has
// been reaped, still has members of ours; see signalLeftGroup.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(pgid, 0); !errors.Is(err, syscall.ESRCH) {
		return false
	}
	return hasLiveMembers(pgid)
}

// signalLeftGroup sends sig to process group pgid, whose leader (a shell
// this package started) has been reaped, if the group still has members,
// and reports whether it did. A group number cannot be reused while the
// group has members; once it is empty, a new process may get the number
// as its pid, and then lead a group of that number. So the group is only
// signalled while no process has the pid pgid: ours was reaped, and any
// other would be someone else's. A group left with only zombies has no
// members in this sense (see hasLiveMembers).
func signalLeftGroup(pgid int, sig syscall.Signal) (bool, error) {
	if err := syscall.Kill(pgid, 0); !errors.Is(err, syscall.ESRCH) {
		return false, nil // the number is someone else's now
	}
	if !hasLiveMembers(pgid) {
		return false, nil
	}
	err := syscall.Kill(-pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return false, nil
	}
	return err == nil, err
}

// killGroup sends sig to process group pgid. A group that is already gone
// is not an error.
func killGroup(pgid int, sig syscall.Signal) error {
	err := syscall.Kill(-pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// oomAdjuster raises the oom_score_adj of new commands above the agent's.
type oomAdjuster struct {
	once sync.Once
	own  int  // the agent's oom_score_adj, read once
	ok   bool // own could be read
}

// adjust sets the oom_score_adj of pid, a command just started, to the
// agent's own plus inc (nothing if inc is negative), at most 1000.
// Raising it needs no privilege. Errors are ignored: without /proc the
// command keeps the agent's value.
//
// The shell has already exec'd when Start returns, so it runs for a few
// microseconds with the agent's value, and a child it forks in that window
// keeps it; every process forked after the write inherits the new value.
func (o *oomAdjuster) adjust(pid, inc int) {
	if inc < 0 {
		return
	}
	o.once.Do(func() {
		b, err := os.ReadFile("/proc/self/oom_score_adj")
		if err == nil {
			o.own, err = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		o.ok = err == nil
	})
	target := min(1000, o.own+inc)
	if !o.ok || target <= o.own {
		return
	}
	_ = os.WriteFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", []byte(strconv.Itoa(target)), 0)
}
