// Package sessions keeps the sessions of the agent: records of a working
// directory, an environment and a user that each command of a session
// starts from, and that each /run or /run_streaming command writes back
// when it ends. A session is data, not a resident shell: every command is
// a fresh shell in its own process group, so commands of one session run
// concurrently, a command that hangs or is killed wedges nothing, and
// deleting a session kills the process groups started in it.
package sessions

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

var (
	// ErrNotFound is returned for an id that names no session; the error
	// text names the id.
	ErrNotFound = errors.New("session not found")
	// ErrExists is returned by Create for an id already in use, unless
	// the request asks to reuse it.
	ErrExists = errors.New("session already exists")
	// ErrInvalid is returned by Create for a configuration it cannot
	// take; the error text says why.
	ErrInvalid = errors.New("invalid session")
	// ErrTooMany is returned by Create while Options.MaxSessions exist.
	ErrTooMany = errors.New("too many sessions")
	// ErrClosed is returned by Create after Close.
	ErrClosed = errors.New("session registry closed")
	// ErrUserMismatch is returned by Call and Background for a command
	// whose own user is not the session's. The state of a session is its
	// user's to change (PATH, LD_PRELOAD, ENV): a command of another user
	// started from it would run what that user put there, as root for a
	// root command in a session of nobody's.
	ErrUserMismatch = errors.New("a session's commands run as the session's user")
)

func notFound(id string) error { return fmt.Errorf("%w: %s", ErrNotFound, id) }

// maxIDLen is the longest session id.
const maxIDLen = 128

// Options configure a Registry. Zero fields take the defaults, which
// small accessors (maxSessions and so on) supply when they are read: the
// Options a caller wrote stay as written.
type Options struct {
	// StateDir is where the registry makes the directory (mode 0711) of
	// the files in which commands leave their state. Users that sessions
	// run as must be able to reach it, as they can /tmp. If empty, the
	// first of /dev/shm and /run that is a tmpfs, else os.TempDir(); see
	// stateParent.
	StateDir string
	// WorkdirParent is where temp workdirs are made; users that sessions
	// run as must be able to reach it too. If empty, os.TempDir().
	WorkdirParent string
	// MaxSessions caps the sessions that exist at once. If zero, 1,000.
	MaxSessions int
	// KillWait bounds how long the deletion of an expired session waits
	// for its commands to be gone. If zero, 3 s.
	KillWait time.Duration
	// MaxEnvBytes bounds the environments of all sessions together,
	// counting each entry's length and 16 bytes. Create refuses a session
	// whose environment would pass it, and a command whose state would
	// take the total past it is not committed (Call.Finish says so); both
	// errors wrap ErrEnvBudget. A deleted session gives its bytes back. If
	// zero, 64 MiB.
	MaxEnvBytes int64
}

func (o Options) maxSessions() int {
	if o.MaxSessions <= 0 {
		return 1_000
	}
	return o.MaxSessions
}

func (o Options) killWait() time.Duration {
	if o.KillWait <= 0 {
		return 3 * time.Second
	}
	return o.KillWait
}

func (o Options) maxEnvBytes() int64 {
	if o.MaxEnvBytes <= 0 {
		return defaultMaxEnvBytes
	}
	return o.MaxEnvBytes
}

// Registry holds the sessions. Close deletes them all.
type Registry struct {
	runner    *executor.Runner
	opts      Options
	states    statePool // the state files, in a directory of their own
	envs      envBudget // the bytes of every session's environment
	agentUser string    // the name commands run as without a user
	agentUID  uint32    // the uid they run as
	// sourceOnce sets sourceKind, whether the shell has `source`, at the
	// first command that needs it.
	sourceOnce sync.Once
	sourceKind sourceSupport
	kick       chan struct{} // capacity 1: the janitor recomputes its deadline
	stop       context.CancelFunc
	wg         sync.WaitGroup // the janitor

	// mu guards sessions and closed. It is never acquired while a
	// Session's mu is held.
	mu       sync.Mutex
	sessions map[string]*Session
	closed   bool
}

// NewRegistry returns a Registry whose commands run with runner. Its Close
// must be called: it ends the janitor that deletes idle sessions.
func NewRegistry(runner *executor.Runner, opts Options) (*Registry, error) {
	dir, err := makeStateDir(opts.StateDir)
	if err != nil {
		return nil, err
	}
	r := &Registry{runner: runner, opts: opts, states: statePool{dir: dir}, agentUser: currentUser(),
		agentUID: uint32(os.Geteuid()), kick: make(chan struct{}, 1), sessions: map[string]*Session{}}
	ctx, stop := context.WithCancel(context.Background())
	r.envs.max = opts.maxEnvBytes()
	r.stop = stop
	r.wg.Add(1)
	go r.janitor(ctx)
	return r, nil
}

// currentUser returns the agent's own user name, or its uid if it has
// none.
func currentUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return strconv.Itoa(os.Geteuid())
}

// List returns a snapshot of every session, in creation order.
func (r *Registry) List() []Info {
	r.mu.Lock()
	all := make([]*Session, 0, len(r.sessions))
	for _, s := range r.sessions {
		all = append(all, s)
	}
	r.mu.Unlock()
	infos := make([]Info, len(all))
	for i, s := range all {
		infos[i] = s.Info()
	}
	slices.SortFunc(infos, func(a, b Info) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return compareStrings(a.ID, b.ID)
	})
	return infos
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Delete deletes the session id names: its id is free at once; every
// process group started in it (its commands, their streams, its
// background processes, and what finished ones left in their groups) is
// killed, every descendant in them included; and its temp workdir is
// removed once its commands are gone, or when ctx ends. Processes that
// left their group on purpose (setsid) escape. It returns an error
// wrapping ErrNotFound for an unknown id, or the workdir's removal error.
func (r *Registry) Delete(ctx context.Context, id string) error {
	r.mu.Lock()
	s, ok := r.sessions[id]
	delete(r.sessions, id)
	r.mu.Unlock()
	if !ok {
		return notFound(id)
	}
	return s.destroy(ctx)
}

// EnvBytes returns what the environments of all sessions cost now, as
// Options.MaxEnvBytes counts it; EnvBudget returns that bound.
func (r *Registry) EnvBytes() int64 { return r.envs.used.Load() }

// EnvBudget returns Options.MaxEnvBytes, or its default.
func (r *Registry) EnvBudget() int64 { return r.envs.max }

// Close stops Create, ends the janitor and deletes every session, as
// Delete does, within ctx; then it removes the state directory.
func (r *Registry) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	all := make([]*Session, 0, len(r.sessions))
	for _, s := range r.sessions {
		all = append(all, s)
	}
	clear(r.sessions)
	r.mu.Unlock()
	r.stop()
	r.wg.Wait()
	killed := make([][]*executor.Process, len(all))
	for i, s := range all {
		killed[i] = s.kill()
	}
	var errs []error
	for i, s := range all {
		errs = append(errs, s.cleanUp(ctx, killed[i]))
	}
	r.states.close()
	errs = append(errs, os.RemoveAll(r.states.dir))
	return errors.Join(errs...)
}
