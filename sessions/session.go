package sessions

import (
	"context"
	"os"
	"sync"
	"time"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// Session is the record of one session: the state its commands start
// from, and the process groups started in it. It holds no process of its
// own.
type Session struct {
	id        string
	user      *executor.User  // nil: the agent's own user
	userName  string          // user's name, or the agent's own
	workdir   string          // the temp workdir removed with the session; "" if none
	idle      time.Duration   // 0: never expires
	timeout   time.Duration   // default timeout of its commands; 0: none
	limits    executor.Limits // default limits of its commands, key by key
	createdAt time.Time
	envs      *envBudget // the registry's, which envBytes counts in

	// mu guards the fields below. The state (cwd, env) is replaced whole
	// by each commit, never modified in place: a command holds the slice
	// it started from.
	mu       sync.Mutex
	cwd      string
	env      []string // the whole environment, "NAME=value"
	envBytes int64    // envSize(env), counted in envs; 0 once deleted
	lastUsed time.Time
	calls    int                 // foreground commands running (Call to Finish)
	procs    []*executor.Process // started in the session; those whose group may have members
	pruneAt  int                 // len(procs) at which track prunes it
	deleted  bool                // set once, by destroy
}

// Info is a snapshot of a session for listing.
type Info struct {
	ID         string
	Cwd        string
	User       string // the name its commands run as
	CreatedAt  time.Time
	LastUsedAt time.Time
	// Running is how many of its commands and background processes are
	// running.
	Running int
}

// Info returns a snapshot of s.
func (s *Session) Info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	running := 0
	for _, p := range s.procs {
		if !isDone(p) {
			running++
		}
	}
	return Info{ID: s.id, Cwd: s.cwd, User: s.userName, CreatedAt: s.createdAt, LastUsedAt: s.lastUsed, Running: running}
}

func isDone(p *executor.Process) bool {
	select {
	case <-p.Done():
		return true
	default:
		return false
	}
}

// track records p, a process just started in s. It is the OnStart of
// every command of s, so it runs before the start returns. A process
// started while s was being deleted is killed at once: destroy has taken
// the list already.
func (s *Session) track(p *executor.Process) {
	s.mu.Lock()
	if s.deleted {
		s.mu.Unlock()
		_ = p.Kill()
		return
	}
	if len(s.procs) >= s.pruneAt {
		s.pruneLocked()
	}
	s.procs = append(s.procs, p)
	s.mu.Unlock()
}

// pruneLocked forgets the processes that have finished and left nothing
// in their groups, and sets when to prune next: pruning when the list has
// doubled keeps its cost per start constant. s.mu must be held.
func (s *Session) pruneLocked() {
	kept := s.procs[:0]
	for _, p := range s.procs {
		// Signal 0 on a finished command is ErrFinished once its group
		// is empty (see executor.Process.Signal).
		if !isDone(p) || p.Signal(0) == nil {
			kept = append(kept, p)
		}
	}
	clear(s.procs[len(kept):])
	s.procs = kept
	s.pruneAt = max(16, 2*len(kept))
}

// destroy kills every process group started in s, every descendant in
// them included, waits until ctx ends for the commands to be gone, and
// removes s's temp workdir. s must have left the registry: nothing new
// starts in it (see track).
func (s *Session) destroy(ctx context.Context) error {
	return s.cleanUp(ctx, s.kill())
}

// kill marks s deleted, gives its environment's bytes back to the
// budget, and sends SIGKILL to every process group started in it, and to
// every process of the terminals started in it (an interactive shell puts
// each job in a group of its own). It returns the processes, for cleanUp.
func (s *Session) kill() []*executor.Process {
	s.mu.Lock()
	s.deleted = true
	s.envs.give(s.envBytes)
	s.envBytes = 0
	procs := s.procs
	s.procs = nil
	s.mu.Unlock()
	for _, p := range procs {
		_ = p.Kill() // ErrFinished for a group already empty
	}
	return procs
}

// cleanUp waits until procs, killed, are gone or ctx ends, then removes
// s's temp workdir.
func (s *Session) cleanUp(ctx context.Context, procs []*executor.Process) error {
	for _, p := range procs {
		select {
		case <-p.Done():
		case <-ctx.Done():
		}
	}
	if s.workdir == "" {
		return nil
	}
	return os.RemoveAll(s.workdir)
}

// touch marks s used now.
func (s *Session) touch() {
	s.mu.Lock()
	s.lastUsed = time.Now()
	s.mu.Unlock()
}
