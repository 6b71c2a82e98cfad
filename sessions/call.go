package sessions

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// Call is one foreground command (/run, /run_streaming) of a session. It
// starts from the session's state and, if it ends by itself, commits the
// state its shell ended with. Create it with Registry.Call; Finish it.
type Call struct {
	// Command is the command to run: the request's, made to start in the
	// session's cwd, with its environment and user, and wrapped so that
	// its shell leaves its state in a file of the agent's.
	Command executor.Command

	r        *Registry
	s        *Session
	state    *stateFile
	startDir string            // where the shell started: the session's cwd, or the request's
	fromCwd  string            // the session's state the command started from
	fromEnv  []string          //
	overlay  map[string]string // what the request laid over fromEnv, for this command only
}

// Call returns c made into a command of session id; see Call. A request's
// positive Timeout wins over the session's. It returns an error wrapping
// ErrNotFound for an unknown id, ErrUserMismatch for a c.User that is not
// the session's user (see use), or the system's if the state file could
// not be made.
func (r *Registry) Call(id string, c executor.Command) (*Call, error) {
	s, cwd, env, err := r.use(id, &c, true)
	if err != nil {
		return nil, err
	}
	call := &Call{r: r, s: s, fromCwd: cwd, fromEnv: env}
	c, call.startDir, call.overlay = s.prepare(c, cwd, env)
	if c.Timeout <= 0 {
		c.Timeout = s.timeout
	}
	if call.state, err = r.states.get(c.User); err != nil {
		s.end(r, false, "", nil)
		return nil, err
	}
	c.Cmd = wrap(c.Cmd, call.state.path, r.source())
	call.Command = c
	return call, nil
}

// source returns whether the Runner's shell has `source`, asking it the
// first time. If it cannot tell, each command's shell asks itself.
func (r *Registry) source() sourceSupport {
	r.sourceOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		out, err := r.runner.Run(ctx, executor.Command{Cmd: "command -v source >/dev/null"})
		switch {
		case err != nil || out.Signal != 0 || out.TimedOut:
			r.sourceKind = sourceUnknown
		case out.Code == 0:
			r.sourceKind = sourceBuiltin
		default:
			r.sourceKind = sourceMissing
		}
	})
	return r.sourceKind
}

// Background returns c made to start from session id's state, for a
// command that commits nothing: a background process, or a terminal. The
// request's own cwd, env and user apply as for Call; the session's
// timeout does not (a server is not a command that should end). Its
// process group is the session's, which Delete kills. It returns an error
// wrapping ErrNotFound for an unknown id, or ErrUserMismatch as Call does.
func (r *Registry) Background(id string, c executor.Command) (executor.Command, error) {
	s, cwd, env, err := r.use(id, &c, false)
	if err != nil {
		return c, err
	}
	c, _, _ = s.prepare(c, cwd, env)
	return c, nil
}

// use returns the session id names and the state to start from, and marks
// it used; a foreground command counts as running from now on, so the
// janitor cannot expire the session under it.
//
// c's own User, if set, must be the session's user (the same uid): it is
// then dropped, and c runs as the session's user. Another user is refused
// with an error wrapping ErrUserMismatch, in either direction: root must
// not run what nobody's PATH, LD_PRELOAD or ENV names, and nobody's
// command must not get the state of root's session.
func (r *Registry) use(id string, c *executor.Command, foreground bool) (*Session, string, []string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sessions[id]
	if !ok {
		return nil, "", nil, notFound(id)
	}
	if c.User != nil {
		uid := r.agentUID
		if s.user != nil {
			uid = s.user.UID
		}
		if c.User.UID != uid {
			return nil, "", nil, fmt.Errorf("%w: session %s runs as %s, not as %s; create a session for %s",
				ErrUserMismatch, id, s.userName, c.User.Name, c.User.Name)
		}
		c.User = nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if foreground {
		s.calls++
	}
	s.lastUsed = time.Now()
	return s, s.cwd, s.env, nil
}

// prepare makes c start from the state cwd and env of s, as its user. A
// relative c.Dir is taken from cwd. c.Env is laid over env: that overlay
// is returned, with the directory the command starts in.
func (s *Session) prepare(c executor.Command, cwd string, env []string) (executor.Command, string, map[string]string) {
	dir := cwd
	if c.Dir != "" {
		dir = c.Dir
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cwd, dir)
		}
		dir = filepath.Clean(dir)
	}
	overlay := c.Env
	c.User = s.user // use has refused any other
	base := make([]string, len(env), len(env)+1)
	copy(base, env)
	// A shell trusts PWD when it names its directory: it is what pwd and
	// cd .. then go by, as in a shell that had cd'd there.
	c.Dir, c.BaseEnv, c.Env = dir, append(base, "PWD="+dir), overlay
	c.OnStart = s.track
	c.Limits = c.Limits.Or(s.limits)
	return c, dir, overlay
}

// Finish ends c once its command has ended; res is how it ended, nil if
// it never started. If the shell exited by itself (whatever its exit
// code; not killed by a signal or its timeout) and left a whole state,
// the session takes that state, unless the session was deleted meanwhile.
// What the request set for this command alone (cwd, env) is not
// kept unless the command changed it: its directory if it ended where it
// started, and each variable of the overlay still at the request's value,
// are the session's as they were. A state that would take the
// environments of all sessions past Options.MaxEnvBytes is not committed:
// Finish then returns an error wrapping ErrEnvBudget, which the command's
// client must be told. A nil c does nothing.
func (c *Call) Finish(res *executor.Result) error {
	if c == nil {
		return nil
	}
	defer c.r.states.put(c.state)
	var cwd string
	var env []string
	ok := false
	if res != nil && res.Signal == 0 && !res.TimedOut {
		if b, err := c.state.read(); err == nil {
			cwd, env, ok = parseState(b)
			ok = ok && passable(env)
		}
	}
	if ok {
		cwd, env = c.own(cwd, env)
	}
	return c.s.end(c.r, ok, cwd, env)
}

// own returns the state a command ended with, cwd and env, without what
// its request set for it alone; see Finish.
func (c *Call) own(cwd string, env []string) (string, []string) {
	if cwd == c.startDir {
		cwd = c.fromCwd
	}
	for k, v := range c.overlay {
		i := indexEnv(env, k)
		if i < 0 || env[i][len(k)+1:] != v {
			continue // the command changed it
		}
		if j := indexEnv(c.fromEnv, k); j >= 0 {
			env[i] = c.fromEnv[j]
		} else {
			env = append(env[:i], env[i+1:]...)
		}
	}
	return cwd, env
}

// end records that a foreground command of s has ended, and commits its
// state if ok and the budget takes its environment; if not, the error
// wraps ErrEnvBudget.
func (s *Session) end(r *Registry, ok bool, cwd string, env []string) error {
	var err error
	s.mu.Lock()
	s.calls--
	s.lastUsed = time.Now()
	if ok && !s.deleted {
		n := envSize(env)
		if err = s.envs.resize(s.envBytes, n, "this command's state needs"); err == nil {
			s.cwd, s.env, s.envBytes = cwd, env, n
		}
	}
	idle := s.calls == 0 && s.idle > 0
	s.mu.Unlock()
	if idle {
		r.kickJanitor() // its deadline starts now
	}
	if err != nil {
		return fmt.Errorf("the session's state was not saved: %w", err)
	}
	return nil
}

// passable reports whether every entry of env can be given to a process:
// the kernel refuses one over MAX_ARG_STRLEN, 32 pages. A session that
// took such a variable could start no more commands.
func passable(env []string) bool {
	limit := 32 * os.Getpagesize()
	for _, kv := range env {
		if len(kv) >= limit {
			return false
		}
	}
	return true
}

// indexEnv returns the index of variable name in env, or -1.
func indexEnv(env []string, name string) int {
	for i, kv := range env {
		if len(kv) > len(name) && kv[len(name)] == '=' && strings.HasPrefix(kv, name) {
			return i
		}
	}
	return -1
}
