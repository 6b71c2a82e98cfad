package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/sessions"
)

// The channel bytes of /exec_ws's binary frames: Kubernetes'
// v5.channel.k8s.io numbering.
const (
	execStdin  = 0
	execStdout = 1
	execStderr = 2
	execClose  = 255 // client→agent; its payload is the channel to close
)

// execRequest is the first message of /exec_ws, a text frame.
type execRequest struct {
	Cmd string `json:"cmd"`
	// Argv, if present, is the program and its arguments, run without a
	// shell; exactly one of Cmd and Argv. A pointer, so that an empty
	// array can be told from none.
	Argv    *[]string         `json:"argv"`
	Cwd     string            `json:"cwd"`
	Env     map[string]string `json:"env"`
	Session string            `json:"session"`
	User    stringOrNumber    `json:"user"`
	Timeout *float64          `json:"timeout"`
	// TTY runs the command on a pseudo-terminal of Cols×Rows; without
	// a command, the login shell, as /start_terminal.
	TTY  bool `json:"tty"`
	Cols *int `json:"cols"`
	Rows *int `json:"rows"`
	// Stdin makes channel 0 the command's stdin; without it stdin is
	// /dev/null (a TTY's input is always open) and channel 0 is ignored.
	Stdin bool `json:"stdin"`
	// StdinRaw asks for a side channel for stdin (with Stdin, on pipes):
	// started then carries its stdin_id; see exec_ws_stdin.go.
	StdinRaw bool `json:"stdin_raw"`
	// Limits bound what the command may use, as on /run; see parseLimits.
	Limits json.RawMessage `json:"limits"`
}

// execSpec is what an execRequest asks for, checked.
type execSpec struct {
	cmd  executor.Command // for a TTY, the directory, environment, user and OnStart
	call *sessions.Call   // a session's pipe command, to finish once it has ended
	tty  bool
	// stdinRaw gives the command a stdin side channel; see exec_ws_stdin.go.
	stdinRaw bool
	args     []string // a TTY's program and arguments
	cols     uint16
	rows     uint16
	timeout  time.Duration
	// touch marks a TTY command's session used, at its input and output
	// (as a terminal's WebSocket does); nil outside a session. A pipe
	// command's session is in use while its Call runs.
	touch func()
}

// handleExecWS serves GET /exec_ws: a command whose stdin, stdout and
// stderr travel byte for byte over a WebSocket, as channels of binary
// frames (kubectl exec's v5.channel.k8s.io), with JSON control messages
// in text frames. The request is the first message; one it cannot run
// gets {"type":"error"} and close 1008, nothing started. A client that
// leaves has the command's group killed.
func (s *Server) handleExecWS(w http.ResponseWriter, r *http.Request) error {
	conn, err := acceptWebSocket(w, r)
	if err != nil {
		return err
	}
	defer conn.CloseNow()
	conn.SetReadLimit(wsMaxMessage)
	spec, err := s.readExecRequest(r.Context(), conn, bodyTimeout(r))
	if err != nil {
		refuseExec(r.Context(), conn, err)
		return nil
	}
	s.serveExec(r.Context(), conn, spec)
	return nil
}

// wsExecError is the message of a request /exec_ws refuses.
type wsExecError struct {
	Type   string `json:"type"` // "error"
	Error  string `json:"error"`
	Status int    `json:"status"` // what /run would answer: 400, 403, 404, 503...
}

// refuseExec says why the request was refused and closes the connection:
// 1008 for the client's fault, 1013 when the agent is busy, 1011 for
// the agent's own failure (whose details go to no client).
func refuseExec(ctx context.Context, conn *websocket.Conn, err error) {
	code, msg, _ := replyOf(err)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = sendJSON(wctx, conn, wsExecError{"error", msg, code})
	status := websocket.StatusPolicyViolation
	switch {
	case code == http.StatusServiceUnavailable:
		status = websocket.StatusTryAgainLater
	case code >= 500:
		status = websocket.StatusInternalError
	}
	_ = conn.Close(status, (&wsProtocolError{msg}).reason())
}

// readExecRequest reads the first message, within the body timeout, and
// checks it as /run would, session and user included.
func (s *Server) readExecRequest(ctx context.Context, conn *websocket.Conn, timeout time.Duration) (execSpec, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	typ, data, err := conn.Read(rctx)
	if err != nil {
		if rctx.Err() != nil && ctx.Err() == nil {
			return execSpec{}, errorf(http.StatusRequestTimeout, "no request within %s: send it as the first message", timeout)
		}
		return execSpec{}, errorf(http.StatusBadRequest, "no request: %v", err)
	}
	if typ != websocket.MessageText {
		return execSpec{}, errorf(http.StatusBadRequest, "the first message is the request, a JSON text frame")
	}
	var req execRequest
	if err := json.Unmarshal(data, &req); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return execSpec{}, errorf(http.StatusBadRequest, "invalid request: field %q must be %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()))
		}
		return execSpec{}, errorf(http.StatusBadRequest, "invalid request: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return s.execSpec(req)
}

// execSpec checks req and applies its session and user.
func (s *Server) execSpec(req execRequest) (execSpec, error) {
	spec := execSpec{tty: req.TTY, stdinRaw: req.StdinRaw}
	var err error
	if req.StdinRaw && (!req.Stdin || req.TTY) {
		return spec, errorf(http.StatusBadRequest, `"stdin_raw" needs "stdin": true, and no tty`)
	}
	if spec.timeout, err = seconds("timeout", req.Timeout); err != nil {
		return spec, err
	}
	c, err := execCommand(req)
	if err != nil {
		return spec, err
	}
	c.Dir, c.Env, c.Stdin, c.Timeout = req.Cwd, req.Env, req.Stdin && !req.TTY, spec.timeout
	if c.Limits, err = parseLimits(req.Limits); err != nil {
		return spec, err
	}
	if err := s.checkLimits(c.Limits); err != nil {
		return spec, err // refused before anything starts, on pipes or a TTY
	}
	if !req.TTY {
		if err := executor.Check(c); err != nil {
			return spec, err
		}
		c, spec.call, err = s.sessionCommand(req.Session, string(req.User), c, true)
		spec.cmd = c
		return spec, err
	}
	if spec.cols, err = terminalSize("cols", req.Cols, 80); err != nil {
		return spec, err
	}
	if spec.rows, err = terminalSize("rows", req.Rows, 24); err != nil {
		return spec, err
	}
	if err := executor.Check(c); err != nil {
		return spec, err
	}
	// A TTY command is a terminal without a registry: it starts from the
	// session's state and commits nothing, as /start_terminal's.
	if c, _, err = s.sessionCommand(req.Session, string(req.User), c, false); err != nil {
		return spec, err
	}
	spec.cmd = c
	if req.Session != "" {
		if spec.touch, err = s.sessions.Toucher(req.Session); err != nil {
			return spec, err
		}
	}
	if _, ok := c.Env["TERM"]; !ok {
		c.Env = mergeEnv(map[string]string{"TERM": "xterm-256color"}, c.Env)
		spec.cmd.Env = c.Env
	}
	switch {
	case c.Argv != nil:
		// As executor.Runner runs an argv it cannot start directly: the
		// shell execs the words as they are, and reports a program it
		// cannot run as the command's own 127 or 126.
		spec.args = append([]string{s.shell(), "-c", `exec "$0" "$@"`}, c.Argv...)
	case c.Cmd == "":
		spec.args = []string{s.terms.LoginShell(c.Env, c.BaseEnv), "-i"}
	default:
		spec.args = []string{s.shell(), "-c", c.Cmd}
	}
	return spec, nil
}

// execCommand returns the command req asks for, as /run's commandOf
// does: cmd, or argv run with no shell (through a session's shell, in a
// session; see sessionCommand). Neither is a TTY's login shell.
func execCommand(req execRequest) (executor.Command, error) {
	if req.TTY && req.Cmd == "" && req.Argv == nil {
		return executor.Command{}, nil
	}
	var argv []string
	if req.Argv != nil {
		argv = *req.Argv
		if argv == nil {
			argv = []string{} // present and empty, not absent: a 400
		}
	}
	return commandOf(req.Cmd, argv)
}

// shell returns the runner's shell.
func (s *Server) shell() string {
	if s.runner.Shell == "" {
		return "/bin/sh"
	}
	return s.runner.Shell
}

// Agent→client control messages of /exec_ws.
type (
	wsExecStarted struct {
		Type string `json:"type"` // "started"
		PID  int    `json:"pid"`
		// StdinID names the stdin side channel, for a request that asked
		// for one (stdin_raw); absent otherwise.
		StdinID string `json:"stdin_id,omitempty"`
	}
	wsExecExit struct {
		Type        string               `json:"type"` // "exit"
		Code        int                  `json:"code"`
		Termination executor.Termination `json:"termination"`
	}
)

// serveExec runs spec over conn until the command ends (exit, then a
// normal close), the client leaves (the command's group is killed), or
// the agent shuts down (ctx ends: the group is killed, a going-away
// close).
//
// Goroutines, as serveTerminal's: execInput is the only reader;
// pingExecClient drops a client that answers no ping within the stall
// timeout; the command's output is written by its pipe readers (through
// execOutput) or by ttyExec.output, which x.wait waits for. The first two
// end with connCtx and are waited for before serveExec returns.
func (s *Server) serveExec(ctx context.Context, conn *websocket.Conn, spec execSpec) {
	connCtx, cancelConn := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancelConn()
	// runCtx is the command's: it ends when the client leaves, stops
	// answering, or the agent shuts down; the runner then kills the group.
	runCtx, kill := context.WithCancel(ctx)
	defer kill()
	stop := context.AfterFunc(connCtx, kill)
	defer stop()

	x, err := s.startExec(runCtx, conn, connCtx, spec)
	if err != nil {
		_ = spec.call.Finish(nil) // nothing ran, nothing to commit
		if !isClientStartError(err) {
			s.log.Warn().Err(err).Msg("exec_ws: command did not start")
		}
		refuseExec(ctx, conn, startError(err))
		return
	}
	started := wsExecStarted{Type: "started", PID: x.pid()}
	var side *sideStdin
	if px, ok := x.(*pipeExec); ok && spec.stdinRaw {
		side = s.execStdins.add(px.p)
		defer s.execStdins.remove(side) // on every path; after x.wait, the command has ended
		px.side, started.StdinID = side, side.id
	}
	if sendJSON(connCtx, conn, started) != nil {
		kill()
	}
	x.begin()            // output may flow now, after started
	var busy atomic.Bool // the reader waits for the command to read its stdin
	wg.Add(2)
	go execInput(connCtx, &wg, conn, x, &busy, cancelConn)
	go pingExecClient(connCtx, &wg, conn, s.cfg.KeepAlive, s.cfg.StallTimeout, &busy, cancelConn)

	res := x.wait()
	s.execStdins.remove(side) // its request ends now, not after the exit is sent
	if err := spec.call.Finish(&res); err != nil {
		s.log.Debug().Err(err).Msg("exec_ws: session state not committed")
	}
	select {
	case <-ctx.Done():
		_ = conn.Close(websocket.StatusGoingAway, "agent shutting down")
		return
	case <-connCtx.Done():
		return // the client left, or answered no ping
	default:
	}
	if err := sendJSON(connCtx, conn, wsExecExit{"exit", res.Code, x.termination(res)}); err == nil {
		_ = conn.Close(websocket.StatusNormalClosure, "command exited")
	}
}
