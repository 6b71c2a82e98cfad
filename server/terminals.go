package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"syscall"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/procs"
	"github.com/sandbox-executor/sandbox-executor/terminals"
)

// maxTerminalSize is the largest number of columns or rows a terminal may
// have.
const maxTerminalSize = 1000

// terminalRequest is the body of /start_terminal.
type terminalRequest struct {
	Cmd     string            `json:"cmd"`
	Cwd     string            `json:"cwd"`
	Env     map[string]string `json:"env"`
	Cols    *int              `json:"cols"`
	Rows    *int              `json:"rows"`
	Session string            `json:"session"` // start from a session's state, as /start_process does
	User    stringOrNumber    `json:"user"`    // run as that user (a name or a uid)
	Limits  json.RawMessage   `json:"limits"`  // see parseLimits
}

// terminalSpec validates req and returns the terminal it asks for. It is
// the one place a request becomes a terminals.Spec: its user and session
// apply as they do to a background process (see sessionCommand), so a
// session's terminal starts from the session's state, commits nothing,
// and dies with the session; unlike a background process, it keeps the
// session in use while a client uses it.
func (s *Server) terminalSpec(req terminalRequest) (terminals.Spec, error) {
	spec := terminals.Spec{Cmd: req.Cmd}
	var err error
	if spec.Cols, err = terminalSize("cols", req.Cols, 80); err != nil {
		return spec, err
	}
	if spec.Rows, err = terminalSize("rows", req.Rows, 24); err != nil {
		return spec, err
	}
	lim, err := parseLimits(req.Limits)
	if err != nil {
		return spec, err
	}
	c, _, err := s.sessionCommand(req.Session, string(req.User), executor.Command{Dir: req.Cwd, Env: req.Env, Limits: lim}, false)
	if err != nil {
		return spec, err
	}
	spec.Dir, spec.Env, spec.BaseEnv, spec.User, spec.OnStart = c.Dir, c.Env, c.BaseEnv, c.User, c.OnStart
	spec.Limits = c.Limits
	if req.Session != "" {
		// A client using the terminal over its WebSocket uses the
		// session: its idle timeout must not kill a shell being typed in.
		if spec.OnActivity, err = s.sessions.Toucher(req.Session); err != nil {
			return spec, err
		}
	}
	return spec, nil
}

// terminalSize returns *v, or def if v is nil, as a terminal dimension:
// 1 to maxTerminalSize, else a 400 naming the field.
func terminalSize(field string, v *int, def uint16) (uint16, error) {
	if v == nil {
		return def, nil
	}
	if *v < 1 || *v > maxTerminalSize {
		return 0, errorf(http.StatusBadRequest, "%s must be between 1 and %d", field, maxTerminalSize)
	}
	return uint16(*v), nil
}

// handleTerminalStart serves POST /start_terminal. The terminal outlives
// the request, and any client: it ends by itself, by /kill_terminal, or at
// shutdown.
func (s *Server) handleTerminalStart(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[terminalRequest](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	spec, err := s.terminalSpec(req)
	if err != nil {
		return err
	}
	t, err := s.terms.Start(spec)
	if err != nil {
		if isClientStartError(err) || errors.Is(err, terminals.ErrTooMany) || errors.Is(err, terminals.ErrClosed) {
			return err
		}
		return &httpError{code: http.StatusInternalServerError, msg: "failed to start terminal", cause: err}
	}
	encode(w, http.StatusCreated, map[string]any{"id": t.ID, "pid": t.PID, "status": terminals.StatusRunning})
	return nil
}

// terminalItem is one entry of /list_terminals.
type terminalItem struct {
	ID       string           `json:"id"`
	PID      int              `json:"pid"`
	Status   terminals.Status `json:"status"`
	Command  string           `json:"command"`
	Cols     int              `json:"cols"`
	Rows     int              `json:"rows"`
	ExitCode *int             `json:"exit_code,omitempty"`
	Clients  int              `json:"clients"`
}

// handleTerminalList serves GET /list_terminals.
func (s *Server) handleTerminalList(w http.ResponseWriter, r *http.Request) error {
	infos := s.terms.List()
	items := make([]terminalItem, len(infos)) // [] rather than null when empty
	for i, t := range infos {
		items[i] = terminalItem{ID: t.ID, PID: t.PID, Status: t.Status, Command: t.Command,
			Cols: t.Cols, Rows: t.Rows, ExitCode: t.ExitCode, Clients: t.Clients}
	}
	encode(w, http.StatusOK, map[string]any{"terminals": items})
	return nil
}

// handleTerminalResize serves POST /resize_terminal.
func (s *Server) handleTerminalResize(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		ID   string `json:"id"`
		Cols *int   `json:"cols"`
		Rows *int   `json:"rows"`
	}
	req, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	if req.ID == "" {
		return errorf(http.StatusBadRequest, "id is required")
	}
	if req.Cols == nil || req.Rows == nil {
		return errorf(http.StatusBadRequest, "cols and rows are required")
	}
	cols, err := terminalSize("cols", req.Cols, 0)
	if err != nil {
		return err
	}
	rows, err := terminalSize("rows", req.Rows, 0)
	if err != nil {
		return err
	}
	if err := s.terms.Resize(req.ID, cols, rows); err != nil {
		return err
	}
	encode(w, http.StatusOK, map[string]any{"success": true})
	return nil
}

// handleTerminalKill serves POST /kill_terminal: the signal, SIGKILL
// unless the request names another, goes to every process of the
// terminal's session, before its terminal is closed.
func (s *Server) handleTerminalKill(w http.ResponseWriter, r *http.Request) error {
	id, sig, err := s.decodeKill(w, r)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), killWait)
	defer cancel()
	exited, err := s.terms.Kill(ctx, id, sig)
	if err != nil {
		return err
	}
	msg := "Terminal killed"
	switch {
	case exited:
		msg = "The terminal's program had already exited; " + procs.SignalName(sig) +
			" was sent to the processes it left in its session"
	case sig != syscall.SIGKILL:
		msg = "Signal " + procs.SignalName(sig) + " sent to the terminal's session"
	}
	encode(w, http.StatusOK, map[string]any{"success": true, "message": msg})
	return nil
}
