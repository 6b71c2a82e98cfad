package server

import (
	"context"

	"github.com/sandbox-executor/sandbox-executor/procs"
)

// ExecFuncs returns the ExecFuncs of s for the MCP tools exec and
// exec_poll: the code of /run with yield_ms (startYield) and of
// /poll_process (pollInput, waitYield, the process's output ring), not a
// copy of it. New offers them when Deps.Exec is nil and the Server has a
// process registry: the agent and the test server both get them so.
func (s *Server) ExecFuncs() ExecFuncs {
	return ExecFuncs{Start: s.execStart, Poll: s.execPoll}
}

// execStart is exec: /run with yield_ms and "stdin": true for the agent's
// own user. Its stdin stays open, so that a command still running at the
// yield (a prompt, a REPL) takes exec_poll's input; one that reads its
// stdin to the end (cat, sort) waits for exec_poll's close_stdin, as the
// tool's description says, and one that does not read it never notices.
func (s *Server) execStart(ctx context.Context, c ExecStart) (ExecState, error) {
	req := commandRequest{Cmd: c.Cmd, Cwd: c.Cwd, Env: c.Env, Session: c.Session, Stdin: true}
	if c.Timeout > 0 {
		t := c.Timeout.Seconds()
		req.Timeout = &t
	}
	y, err := s.startYield(ctx, req, c.Yield)
	if err != nil {
		return ExecState{}, err
	}
	st, err := s.execState(y.p, nil)
	if err != nil {
		return st, err
	}
	limit := c.MaxOutput
	if limit <= 0 {
		limit = defaultToolOutput
	}
	if !st.Running && !y.gone && st.Missed == 0 && len(st.Output) <= limit {
		// Its whole output is in this reply: it is nobody's background
		// process, as a /run that ended within yield_ms.
		s.procs.Forget(y.p.ID)
	}
	return st, nil
}

// execPoll is exec_poll: /poll_process without its budget.
func (s *Server) execPoll(ctx context.Context, q ExecPoll) (ExecState, error) {
	p, err := s.procs.Get(q.ProcessID)
	if err != nil {
		return ExecState{}, err
	}
	p.Keep(s.procs.PollBytes()) // before the input: what it brings is this poll's
	if err := s.pollInput(ctx, p, q.Input, q.CloseStdin, max(q.Yield, minInputStall)); err != nil {
		return ExecState{}, err
	}
	_ = waitYield(ctx, p, q.Yield)
	return s.execState(p, q.Cursor)
}

// execState reads p's output after cursor (nil: after the last read), both
// streams together as they came.
func (s *Server) execState(p *procs.Process, cursor *int64) (ExecState, error) {
	o, err := p.ReadMerged(cursor, s.procs.PollBytes())
	if err != nil {
		return ExecState{}, err
	}
	return ExecState{ProcessID: p.ID, Running: o.Info.Status == procs.StatusRunning, ExitCode: o.Info.ExitCode,
		Output: o.Merged, Cursor: o.Cursor, Missed: o.Missed}, nil
}
