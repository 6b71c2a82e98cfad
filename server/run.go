package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/sse"
)

// commandRequest is the body of /run, /run_streaming and /start_process.
type commandRequest struct {
	Cmd string            `json:"cmd"`
	Cwd string            `json:"cwd"`
	Env map[string]string `json:"env"`
	// Timeout is in seconds; absent or zero means none. Clients send it
	// beyond the document.
	Timeout *float64 `json:"timeout"`
}

// command validates req and returns the command it asks for.
func (req commandRequest) command() (executor.Command, error) {
	if req.Cmd == "" {
		return executor.Command{}, errorf(http.StatusBadRequest, "cmd is required")
	}
	c := executor.Command{Cmd: req.Cmd, Dir: req.Cwd, Env: req.Env}
	if req.Timeout != nil {
		t := *req.Timeout
		if t < 0 || math.IsNaN(t) || t > 365*24*3600 {
			return c, errorf(http.StatusBadRequest, "timeout must be a number of seconds between 0 and one year")
		}
		c.Timeout = time.Duration(t * float64(time.Second))
	}
	return c, nil
}

// decodeCommand reads and checks the body of /run, /run_streaming and
// /start_process.
func (s *Server) decodeCommand(w http.ResponseWriter, r *http.Request) (executor.Command, error) {
	req, err := decode[commandRequest](w, r, s.cfg.MaxBody)
	if err != nil {
		return executor.Command{}, err
	}
	return req.command()
}

// startError is the error of a command that did not start: the request's
// fault (400), or the system's, whose details go to the log only.
func startError(err error) error {
	if errors.Is(err, executor.ErrInvalidDir) || errors.Is(err, executor.ErrInvalidCommand) {
		return err
	}
	return &httpError{code: http.StatusInternalServerError, msg: "failed to start command", cause: err}
}

// timeoutMessage is the error of a command its timeout stopped.
func timeoutMessage(c executor.Command) string {
	return fmt.Sprintf("command timed out after %s", c.Timeout)
}

// handleRun serves POST /run: it runs a command to the end and replies
// with its output. If the client leaves, the command's group is killed.
func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) error {
	c, err := s.decodeCommand(w, r)
	if err != nil {
		return err
	}
	out, err := s.runner.Run(r.Context(), c)
	if err != nil {
		return startError(err)
	}
	type reply struct {
		Stdout string `json:"stdout"`
		Stderr string `json:"stderr"`
		Error  string `json:"error,omitempty"`
		Code   int    `json:"code"`
	}
	res := reply{Stdout: string(out.Stdout), Stderr: string(out.Stderr), Code: out.Code}
	switch {
	case out.TimedOut:
		res.Error = timeoutMessage(c)
	case out.Code != 0:
		res.Error = "Non-zero exit code" // the first implementation's words, which clients match
	}
	encode(w, http.StatusOK, res)
	return nil
}

// handleRunStreaming serves POST /run_streaming: output events as lines
// are read, then complete. Lines are written with backpressure: a client
// that reads slowly slows the command rather than growing a buffer. A
// client that leaves gets the command's group killed at once.
func (s *Server) handleRunStreaming(w http.ResponseWriter, r *http.Request) error {
	c, err := s.decodeCommand(w, r)
	if err != nil {
		return err
	}
	// The status must be decided before the stream opens.
	if err := executor.Check(c); err != nil {
		return err
	}
	// A client that stalls past the stall timeout has not closed the
	// connection, so r.Context() lives on: the stream ends the command
	// itself when a write fails.
	ctx, clientGone := context.WithCancel(r.Context())
	defer clientGone()
	st := &runStream{sw: s.newStream(w), clientGone: clientGone}
	p, err := s.runner.Start(ctx, c, st.addLines)
	if err != nil {
		s.log.Warn().Err(err).Msg("run_streaming: command did not start")
		_ = st.sw.Event("error", map[string]string{"error": "failed to start command: " + err.Error()})
		return nil
	}

	ping := time.NewTicker(s.cfg.KeepAlive)
	defer ping.Stop()
	for {
		select {
		case <-p.Done():
			res := p.Wait()
			type complete struct {
				Code    int    `json:"code"`
				Error   bool   `json:"error"`
				Message string `json:"message,omitempty"` // only for a timeout
			}
			done := complete{Code: res.Code, Error: res.Code != 0}
			if res.TimedOut {
				done.Message = timeoutMessage(c)
			}
			st.mu.Lock()
			defer st.mu.Unlock()
			_ = st.sw.Event("complete", done)
			return nil
		case <-ping.C:
			st.mu.Lock()
			if st.sw.PingIfIdle(s.cfg.KeepAlive) != nil {
				st.clientGone()
			}
			st.mu.Unlock()
		}
	}
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
