package server

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/sessions"
)

// sessionItem is a session as /create_session and /list_sessions show
// it; created_at, last_used_at and running are for the list only.
type sessionItem struct {
	ID         string `json:"id"`
	Cwd        string `json:"cwd"`
	User       string `json:"user"`
	CreatedAt  string `json:"created_at,omitempty"`
	LastUsedAt string `json:"last_used_at,omitempty"`
	Running    *int   `json:"running,omitempty"`
}

// handleSessionCreate serves POST /create_session: 201 with the new
// session, or, with "reuse": true, 200 with the session that has the id.
func (s *Server) handleSessionCreate(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		ID          string            `json:"id"`
		Cwd         string            `json:"cwd"`
		Env         map[string]string `json:"env"`
		Workdir     string            `json:"workdir"`
		User        stringOrNumber    `json:"user"` // a name or a uid
		IdleTimeout *float64          `json:"idle_timeout"`
		Timeout     *float64          `json:"timeout"`
		Reuse       bool              `json:"reuse"`
		Limits      json.RawMessage   `json:"limits"` // the default of its commands; see parseLimits
	}
	req, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	cfg := sessions.Config{ID: req.ID, Cwd: req.Cwd, Env: req.Env, Reuse: req.Reuse}
	switch req.Workdir {
	case "":
	case "temp":
		cfg.TempWorkdir = true
	default:
		return errorf(http.StatusBadRequest, `workdir must be "temp" or absent`)
	}
	if cfg.IdleTimeout, err = seconds("idle_timeout", req.IdleTimeout); err != nil {
		return err
	}
	if cfg.Timeout, err = seconds("timeout", req.Timeout); err != nil {
		return err
	}
	if cfg.Limits, err = parseLimits(req.Limits); err != nil {
		return err
	}
	if err := s.checkLimits(cfg.Limits); err != nil {
		return err
	}
	if cfg.User, err = s.lookupUser(string(req.User)); err != nil {
		return err
	}
	sess, created, err := s.sessions.Create(cfg)
	if err != nil {
		return err
	}
	info := sess.Info()
	code := http.StatusCreated
	if !created {
		code = http.StatusOK
	}
	encode(w, code, sessionItem{ID: info.ID, Cwd: info.Cwd, User: info.User})
	return nil
}

// handleSessionList serves GET /list_sessions.
func (s *Server) handleSessionList(w http.ResponseWriter, r *http.Request) error {
	infos := s.sessions.List()
	items := make([]sessionItem, len(infos)) // [] rather than null when empty
	for i, info := range infos {
		items[i] = sessionItem{ID: info.ID, Cwd: info.Cwd, User: info.User, CreatedAt: formatTime(info.CreatedAt),
			LastUsedAt: formatTime(info.LastUsedAt), Running: &info.Running}
	}
	encode(w, http.StatusOK, map[string]any{"sessions": items})
	return nil
}

// handleSessionDelete serves POST /delete_session: it kills every process
// group started in the session and removes its temp workdir, waiting at
// most killWait for the processes to be gone.
func (s *Server) handleSessionDelete(w http.ResponseWriter, r *http.Request) error {
	id, err := decodeID(w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), killWait)
	defer cancel()
	if err := s.sessions.Delete(ctx, id); err != nil {
		return err
	}
	encode(w, http.StatusOK, map[string]any{"success": true})
	return nil
}

// lookupUser returns the user spec names, nil if spec is empty: 403 if the
// agent may not switch users, 400 if there is no such user.
func (s *Server) lookupUser(spec string) (*executor.User, error) {
	if spec == "" {
		return nil, nil
	}
	return s.runner.LookupUser(spec)
}

// sessionCommand applies a command request's user and session to c. A
// foreground command (/run, /run_streaming) of a session comes with the
// Call to finish once it has ended; otherwise the Call is nil (and
// Finish on nil does nothing).
func (s *Server) sessionCommand(session, user string, c executor.Command, foreground bool) (executor.Command, *sessions.Call, error) {
	var err error
	if c.User, err = s.lookupUser(user); err != nil {
		return c, nil, err
	}
	if session == "" {
		if c.User != nil {
			c.Env = mergeEnv(c.User.Env(), c.Env)
		}
		return c, nil, nil
	}
	if c.Argv != nil {
		// The session's shell runs it, so that its state is still kept.
		c.Cmd, c.Argv = executor.ShellQuote(c.Argv), nil
	}
	if foreground {
		call, err := s.sessions.Call(session, c)
		if err != nil {
			return c, nil, err
		}
		c = call.Command
		// The call does not keep the input: the command holds it until
		// written, which the input budget counts.
		call.Command.Input = ""
		return c, call, nil
	}
	c, err = s.sessions.Background(session, c)
	return c, nil, err
}

// mergeEnv returns a's variables with b's laid over them.
func mergeEnv(a, b map[string]string) map[string]string {
	m := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m
}
