package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/sessions"
	"github.com/sandbox-executor/sandbox-executor/sse"
)

// commandRequest is the body of /run, /run_streaming and /start_process.
type commandRequest struct {
	Cmd string `json:"cmd"`
	// Argv, if present, is run in place of Cmd, with no shell; see
	// commandOf.
	Argv []string          `json:"argv"`
	Cwd  string            `json:"cwd"`
	Env  map[string]string `json:"env"`
	// Timeout is in seconds; absent or zero means none. Clients send it
	// beyond the document.
	Timeout *float64 `json:"timeout"`
	// Keepalive asks /run_streaming for ": ping" comments while the
	// command is silent; see wantsPings.
	Keepalive bool `json:"keepalive"`
	// Session, if set, runs the command in that session; see
	// sessionCommand.
	Session string `json:"session"`
	// User, if set, runs the command as that user (a name or a uid).
	User stringOrNumber `json:"user"`
	// Input is written to the command's stdin; see stdin.go.
	Input string `json:"input"`
	// Stdin keeps a background process's stdin open for /write_stdin;
	// /run refuses it without YieldMS, and /run_streaming always.
	Stdin bool `json:"stdin"`
	// Limits bound what the command may use; see parseLimits.
	Limits json.RawMessage `json:"limits"`
	// Ready, for /start_process, is the port it serves and what ready
	// means for it; see parseReady. /run and /run_streaming refuse it.
	Ready json.RawMessage `json:"ready"`
	// Restart, for /start_process, is its restart policy; see
	// parseRestart. /run and /run_streaming refuse it.
	Restart json.RawMessage `json:"restart"`
	// Name, for /start_process, names the process; /run and
	// /run_streaming refuse it.
	Name string `json:"name"`
	// YieldMS, on /run, is how long the reply waits for the command before
	// it hands it over as a background process; see handleRunYield.
	YieldMS *float64 `json:"yield_ms"`
	// MaxOutputBytes, on /run, caps each stream of the reply; see clipOutput.
	MaxOutputBytes *int `json:"max_output_bytes"`
	// Termination asks /run_streaming's complete event for termination.
	Termination bool `json:"termination"`
}

// checkRunOnly refuses the fields only /run takes.
func (req commandRequest) checkRunOnly() error {
	if req.YieldMS != nil || req.MaxOutputBytes != nil {
		return errorf(http.StatusBadRequest, "yield_ms and max_output_bytes are for /run only")
	}
	return nil
}

// checkNoProcessOptions refuses the fields only /start_process takes, for
// /run (with or without yield_ms) and /run_streaming.
func (req commandRequest) checkNoProcessOptions() error {
	if len(req.Ready) > 0 && string(req.Ready) != "null" {
		return errorf(http.StatusBadRequest, "ready is for /start_process only: use /wait_for_port")
	}
	if len(req.Restart) > 0 && string(req.Restart) != "null" {
		return errorf(http.StatusBadRequest, "restart is for /start_process only")
	}
	if req.Name != "" {
		return errorf(http.StatusBadRequest, "name is for /start_process only")
	}
	return nil
}

// command validates req and returns the command it asks for.
func (req commandRequest) command() (executor.Command, error) {
	c, err := commandOf(req.Cmd, req.Argv)
	if err != nil {
		return c, err
	}
	c.Dir, c.Env, c.Input, c.Stdin = req.Cwd, req.Env, req.Input, req.Stdin
	if c.Limits, err = parseLimits(req.Limits); err != nil {
		return c, err
	}
	c.Timeout, err = seconds("timeout", req.Timeout)
	return c, err
}

// commandOf returns the command of a request's cmd and argv, exactly one
// of which must be given: argv absent (or null) is nil, and an empty array
// is not absent. /exec_ws shares it with /run.
func commandOf(cmd string, argv []string) (executor.Command, error) {
	switch {
	case argv == nil && cmd == "":
		return executor.Command{}, errorf(http.StatusBadRequest, "cmd is required")
	case argv != nil && cmd != "":
		return executor.Command{}, errorf(http.StatusBadRequest, "give cmd or argv, not both")
	case argv != nil && (len(argv) == 0 || argv[0] == ""):
		return executor.Command{}, errorf(http.StatusBadRequest, "argv must be a non-empty array of strings whose first names a program")
	}
	return executor.Command{Cmd: cmd, Argv: argv}, nil
}

// seconds returns the duration of field, a number of seconds; nil is 0.
func seconds(field string, v *float64) (time.Duration, error) {
	if v == nil {
		return 0, nil
	}
	t := *v
	if t < 0 || math.IsNaN(t) || t > 365*24*3600 {
		return 0, errorf(http.StatusBadRequest, "%s must be a number of seconds between 0 and one year", field)
	}
	if t > 0 && t < 1e-6 {
		// It would round to no timeout at all, or to one no command
		// could meet.
		return 0, errorf(http.StatusBadRequest, "%s must be 0 (none) or at least one microsecond (1e-6 seconds)", field)
	}
	return time.Duration(t * float64(time.Second)), nil
}

// requestCommand builds the command of a decoded /run body, and applies
// its user and session (see sessionCommand).
func (s *Server) requestCommand(req commandRequest, foreground bool) (executor.Command, *sessions.Call, error) {
	c, err := req.command()
	if err != nil {
		return c, nil, err
	}
	if foreground {
		if err := checkNoStdin(c); err != nil {
			return c, nil, err
		}
		if err := req.checkNoProcessOptions(); err != nil {
			return c, nil, err
		}
	}
	return s.sessionCommand(req.Session, string(req.User), c, foreground)
}

// startError is the error of a command that did not start: the request's
// fault (400), too many commands (503), or the system's, whose details go
// to the log only.
func startError(err error) error {
	if isClientStartError(err) {
		return err
	}
	return &httpError{code: http.StatusInternalServerError, msg: "failed to start command", cause: err}
}

// isClientStartError reports whether a start failed for a reason the
// client can act on, which writeError answers with a 4xx or a 503.
func isClientStartError(err error) bool {
	return errors.Is(err, executor.ErrInvalidDir) || errors.Is(err, executor.ErrInvalidCommand) ||
		errors.Is(err, executor.ErrBusy) || errors.Is(err, executor.ErrNotPrivileged) ||
		errors.Is(err, executor.ErrInputBudget) || errors.Is(err, executor.ErrLimitsUnsupported)
}

// timeoutMessage is the error of a command its timeout stopped.
func timeoutMessage(timeout time.Duration) string {
	return fmt.Sprintf("command timed out after %s", timeout)
}

// handleRun serves POST /run: it runs a command to the end and replies
// with its output. If the client leaves, the command's group is killed.
// A session's command commits its state before the reply.
func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[commandRequest](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	budget, err := outputBudget(req.MaxOutputBytes)
	if err != nil {
		return err
	}
	if req.YieldMS != nil {
		return s.handleRunYield(w, r, req, budget)
	}
	c, call, err := s.requestCommand(req, true)
	if err != nil {
		return err
	}
	timeout, limited := c.Timeout, !c.Limits.IsZero()
	// c is not kept: its input is the command's to hold until written,
	// which the input budget counts (see executor.Runner.MaxInput).
	var out executor.Output
	if budget > 0 {
		out, err = s.runner.RunCapped(r.Context(), c, budget)
	} else {
		out, err = s.runner.Run(r.Context(), c)
	}
	if err != nil {
		_ = call.Finish(nil) // nothing ran, nothing to commit
		return startError(err)
	}
	var sessionErr string
	if err := call.Finish(&out.Result); err != nil {
		sessionErr = err.Error()
	}
	var msg string
	switch {
	case out.TimedOut:
		msg = timeoutMessage(timeout)
	case out.Code != 0:
		msg = "Non-zero exit code" // the first implementation's words, which clients match
	}
	var more []byte
	if budget > 0 || limited {
		t := out.Termination(nil, false) // nothing can signal a /run
		more = appendRunExtra(nil, &t, out.Omitted, 0, nil)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = writeRunReplyMore(w, &out, msg, sessionErr, more) // an error here means the client left
	return nil
}

// handleRunStreaming serves POST /run_streaming: output events as lines
// are read, then complete. Lines are written with backpressure: a client
// that reads slowly slows the command rather than growing a buffer. A
// client that leaves gets the command's group killed at once. A session's
// command commits its state before complete.
func (s *Server) handleRunStreaming(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[commandRequest](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	if err := req.checkRunOnly(); err != nil {
		return err
	}
	c, err := req.command()
	if err != nil {
		return err
	}
	if err := checkNoStdin(c); err != nil {
		return err
	}
	c, call, err := s.sessionCommand(req.Session, string(req.User), c, true)
	if err != nil {
		return err
	}
	// Neither req nor c is kept once the command has started: its input
	// is the command's to hold until written (see executor.Runner.MaxInput).
	pings, timeout := wantsPings(r, req), c.Timeout
	wantTermination := req.Termination || !c.Limits.IsZero()
	// A client that stalls past the stall timeout has not closed the
	// connection, so r.Context() lives on: the stream ends the command
	// itself when a write fails.
	ctx, clientGone := context.WithCancel(r.Context())
	defer clientGone()
	st := &runStream{clientGone: clientGone}
	// The command starts before the stream opens, so that its status can
	// still say why it did not (400, 503); holding st.mu until the stream
	// is open keeps its first lines waiting for it.
	st.mu.Lock()
	p, err := s.runner.Start(ctx, c, st.addLines)
	if err != nil {
		_ = call.Finish(nil) // nothing ran, nothing to commit
		st.mu.Unlock()
		if isClientStartError(err) {
			return err
		}
		s.log.Warn().Err(err).Msg("run_streaming: command did not start")
		_ = s.newStream(w, r).Event("error", map[string]string{"error": "failed to start command: " + err.Error()})
		return nil
	}
	st.sw = s.newStream(w, r)
	st.mu.Unlock()

	var ping <-chan time.Time
	if pings {
		t := time.NewTicker(s.cfg.KeepAlive)
		defer t.Stop()
		ping = t.C
	}
	for {
		select {
		case <-p.Done():
			res := p.Wait()
			type complete struct {
				Code      int    `json:"code"`
				Error     bool   `json:"error"`
				Message   string `json:"message,omitempty"` // only for a timeout
				Truncated bool   `json:"truncated,omitempty"`
				// SessionError says why a session's command left its state
				// uncommitted (the session environment budget).
				SessionError string `json:"session_error,omitempty"`
				// Termination, when the request asked for it or the
				// command had limits.
				Termination *executor.Termination `json:"termination,omitempty"`
			}
			done := complete{Code: res.Code, Error: res.Code != 0, Truncated: res.Truncated}
			if wantTermination {
				t := res.Termination(nil, false) // nothing can signal it; a client gone reads nothing
				done.Termination = &t
			}
			if err := call.Finish(&res); err != nil {
				done.SessionError = err.Error()
			}
			if res.TimedOut {
				done.Message = timeoutMessage(timeout)
			}
			st.mu.Lock()
			defer st.mu.Unlock()
			_ = st.sw.Event("complete", done)
			return nil
		case <-ping:
			st.mu.Lock()
			if st.sw.PingIfIdle(s.cfg.KeepAlive) != nil {
				st.clientGone()
			}
			st.mu.Unlock()
		}
	}
}

// wantsPings reports whether a /run_streaming client asked for ": ping"
// comments on a silent stream: by the body's keepalive, by accepting
// text/event-stream (event-source clients send it, and expect pings), or by
// setting a timeout, which bounds the silence on the server's side. Others
// get none: the Python SDK's own timeout means "no bytes for N seconds",
// and pings would keep it from ever firing.
func wantsPings(r *http.Request, req commandRequest) bool {
	if req.Keepalive || (req.Timeout != nil && *req.Timeout > 0) {
		return true
	}
	for _, v := range r.Header.Values("Accept") {
		if strings.Contains(strings.ToLower(v), "text/event-stream") {
			return true
		}
	}
	return false
}

// The heads of output events, up to the line: see sse.AppendPrepared.
// They are constants in all but name: nothing modifies them.
var (
	stdoutHead = sse.EventHead(nil, 0, "output", `{"stream":"stdout","data":`)
	stderrHead = sse.EventHead(nil, 0, "output", `{"stream":"stderr","data":`)
)

// runStream writes the output events of one /run_streaming command.
type runStream struct {
	// mu guards sw: the stdout and stderr readers and the handler's ping
	// and complete all write to the one stream.
	mu         sync.Mutex
	sw         *sse.Writer
	clientGone context.CancelFunc // kills the command
}

// addLines is the command's executor.LineFunc: one output event per line,
// one flush per batch.
func (st *runStream) addLines(stream executor.Stream, _ time.Time, lines [][]byte) {
	head := stdoutHead
	if stream == executor.Stderr {
		head = stderrHead
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, l := range lines {
		_ = st.sw.AppendPrepared(head, l, "}\n\n")
	}
	if st.sw.Flush() != nil {
		st.clientGone() // it left, or stalled past the stall timeout
	}
}
