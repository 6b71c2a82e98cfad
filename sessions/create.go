package sessions

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// Config describes a session to create. Zero fields take the defaults.
type Config struct {
	// ID is the session's id: 1 to 128 of A-Z a-z 0-9 . _ -. If empty, a
	// UUID.
	ID string
	// TempWorkdir makes a fresh directory (mode 0700, owned by User) the
	// session's cwd; it is removed with the session. Cwd is then ignored.
	TempWorkdir bool
	// Cwd is where the session's commands start, until one changes it;
	// it must be a directory. If empty, the agent's own directory.
	Cwd string
	// Env is laid over the agent's environment (and User's HOME, USER and
	// LOGNAME) to make the session's first environment.
	Env map[string]string
	// User is who the session's commands run as. If nil, the agent's own
	// user.
	User *executor.User
	// IdleTimeout, if positive, deletes the session once no command of
	// it has run for that long; see Registry.janitor.
	IdleTimeout time.Duration
	// Timeout is the timeout of the session's /run and /run_streaming
	// commands that set none. If zero, none.
	Timeout time.Duration
	// Reuse makes Create return the session that has ID, if there is
	// one, rather than ErrExists.
	Reuse bool
	// Limits are the default limits of the session's commands and
	// terminals: a command's own limits win, key by key.
	Limits executor.Limits
}

// ValidID reports whether id can name a session.
func ValidID(id string) bool {
	if id == "" || len(id) > maxIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c == '.' || c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// Create creates a session and returns it, with created true; or, with
// cfg.Reuse, the existing session of that id, with created false. Its
// errors wrap ErrInvalid (a bad id, cwd or env), ErrExists, ErrTooMany,
// ErrEnvBudget or ErrClosed, or are the system's (a temp workdir that
// could not be made).
func (r *Registry) Create(cfg Config) (s *Session, created bool, err error) {
	if cfg.ID == "" {
		cfg.ID = uuid.NewString()
	} else if !ValidID(cfg.ID) {
		return nil, false, fmt.Errorf("%w: id must be 1 to %d characters of A-Z a-z 0-9 . _ -", ErrInvalid, maxIDLen)
	}
	if s, err := r.existing(cfg); s != nil || err != nil {
		return s, false, err
	}
	if err := executor.Check(executor.Command{Cmd: ":", Env: cfg.Env}); err != nil {
		return nil, false, fmt.Errorf("%w: %s", ErrInvalid, strings.TrimPrefix(err.Error(), executor.ErrInvalidCommand.Error()+": "))
	}
	s, err = r.newSession(cfg)
	if err != nil {
		return nil, false, err
	}
	r.mu.Lock()
	old, err := r.addLocked(s)
	r.mu.Unlock()
	if err != nil || old != nil {
		// Another request made it meanwhile, or the registry closed.
		_ = s.destroy(context.Background()) // no process started in s: this only removes its workdir
		if cfg.Reuse && old != nil {
			old.touch()
			return old, false, nil
		}
		return nil, false, err
	}
	r.kickJanitor()
	return s, true, nil
}

// existing returns the session cfg names if it exists: with cfg.Reuse,
// that session, else ErrExists. Both are nil if it does not exist.
func (r *Registry) existing(cfg Config) (*Session, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	s, ok := r.sessions[cfg.ID]
	switch {
	case !ok:
		return nil, nil
	case !cfg.Reuse:
		return nil, fmt.Errorf("%w: %s", ErrExists, cfg.ID)
	}
	s.touch()
	return s, nil
}

// addLocked adds s unless its id is taken (it returns the session that
// has it) or the registry is full or closed. r.mu must be held.
func (r *Registry) addLocked(s *Session) (*Session, error) {
	switch old := r.sessions[s.id]; {
	case r.closed:
		return nil, ErrClosed
	case old != nil:
		return old, fmt.Errorf("%w: %s", ErrExists, s.id)
	case len(r.sessions) >= r.opts.maxSessions():
		return nil, fmt.Errorf("%w (limit %d)", ErrTooMany, r.opts.maxSessions())
	}
	r.sessions[s.id] = s
	return nil, nil
}

// newSession makes the record of a session, takes its environment's
// bytes from the budget (an error wrapping ErrEnvBudget if they do not
// fit), and makes its temp workdir if it asks for one.
func (r *Registry) newSession(cfg Config) (*Session, error) {
	now := time.Now()
	s := &Session{id: cfg.ID, user: cfg.User, userName: r.agentUser, idle: cfg.IdleTimeout,
		timeout: cfg.Timeout, limits: cfg.Limits, createdAt: now, lastUsed: now, pruneAt: 16, envs: &r.envs}
	if cfg.User != nil {
		s.userName = cfg.User.Name
	}
	var err error
	switch {
	case cfg.TempWorkdir: // made last, once nothing else can fail
	case cfg.Cwd != "":
		s.cwd, err = checkCwd(cfg.Cwd)
	default:
		s.cwd, err = os.Getwd()
	}
	if err != nil {
		return nil, err
	}
	env := r.runner.Environ()
	if cfg.User != nil {
		env = appendEnv(env, cfg.User.Env())
	}
	s.env = appendEnv(env, cfg.Env)
	s.envBytes = envSize(s.env)
	if err := r.envs.take(s.envBytes, "a new session needs"); err != nil {
		return nil, err
	}
	if cfg.TempWorkdir {
		if s.workdir, err = r.makeWorkdir(cfg.User); err != nil {
			r.envs.give(s.envBytes)
			return nil, err
		}
		s.cwd = s.workdir
	}
	return s, nil
}

// checkCwd returns dir, made absolute, if it is a directory the agent may
// enter; else an error wrapping executor.ErrInvalidDir.
func checkCwd(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := executor.Check(executor.Command{Cmd: ":", Dir: abs}); err != nil {
		return "", err
	}
	return abs, nil
}

// makeWorkdir makes a fresh temp workdir, mode 0700, owned by u (the
// agent, if nil).
func (r *Registry) makeWorkdir(u *executor.User) (string, error) {
	dir, err := os.MkdirTemp(r.opts.WorkdirParent, "session-")
	if err != nil {
		return "", err
	}
	if u != nil {
		if err := os.Chown(dir, int(u.UID), int(u.GID)); err != nil {
			os.Remove(dir)
			return "", err
		}
	}
	return dir, nil
}

// appendEnv returns env with the variables of m set: an entry of env that
// m names is dropped, and m's are added in name order.
func appendEnv(env []string, m map[string]string) []string {
	if len(m) == 0 {
		return env
	}
	out := slices.DeleteFunc(env, func(kv string) bool {
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				_, set := m[kv[:i]]
				return set
			}
		}
		return false
	})
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		out = append(out, k+"="+m[k])
	}
	return out
}
