package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/procs"
)

// maxYield bounds yield_ms: a reply waits at most this long.
const maxYield = 10 * time.Minute

// maxOutputBudget bounds max_output_bytes: /run keeps no more of a stream.
const maxOutputBudget = 8 << 20

// yieldOf returns the duration of a yield_ms field; nil is 0.
func yieldOf(v *float64) (time.Duration, error) {
	if v == nil {
		return 0, nil
	}
	if !(*v >= 0 && *v <= float64(maxYield/time.Millisecond)) {
		return 0, errorf(http.StatusBadRequest, "yield_ms must be a number of milliseconds between 0 and %d", maxYield/time.Millisecond)
	}
	return time.Duration(*v * float64(time.Millisecond)), nil
}

// outputBudget returns the budget of a max_output_bytes field, 0 if it is
// absent.
func outputBudget(v *int) (int, error) {
	if v == nil {
		return 0, nil
	}
	if *v < 1 || *v > maxOutputBudget {
		return 0, errorf(http.StatusBadRequest, "max_output_bytes must be between 1 and %d", maxOutputBudget)
	}
	return *v, nil
}

// clipped is one stream of a reply within its budget.
type clipped struct {
	data    []byte
	omitted int64
}

// clipOutput keeps stdout and stderr within budget each (0: no budget):
// the head and the tail of each, with the marker line between them.
func clipOutput(stdout, stderr []byte, budget int) (out, errb clipped) {
	if budget <= 0 {
		return clipped{data: stdout}, clipped{data: stderr}
	}
	out.data, out.omitted = executor.Clip(stdout, budget)
	errb.data, errb.omitted = executor.Clip(stderr, budget)
	return out, errb
}

// pollReply is the reply of /poll_process, and of a /run whose command
// was handed over (status running).
type pollReply struct {
	Status       procs.Status          `json:"status"`
	ID           string                `json:"id,omitempty"` // /run's only
	Stdout       string                `json:"stdout"`
	Stderr       string                `json:"stderr"`
	Cursor       int64                 `json:"cursor"`
	ExitCode     *int                  `json:"exit_code,omitempty"`
	Termination  *executor.Termination `json:"termination,omitempty"`
	Missed       int64                 `json:"missed,omitempty"`
	Truncated    bool                  `json:"truncated,omitempty"`
	OmittedBytes int64                 `json:"omitted_bytes,omitempty"`
	Middle       *middleRef            `json:"middle,omitempty"`
}

// middleRef names the log lines that hold what max_output_bytes left
// out, for /process_logs_streaming (last_event_id first_line-1).
type middleRef struct {
	ID        string `json:"id"`
	FirstLine uint64 `json:"first_line"`
	LastLine  uint64 `json:"last_line"`
}

// middleOf returns the reference to o's middle in p's log, or nil.
func middleOf(p *procs.Process, o procs.Output) *middleRef {
	if o.Middle == nil {
		return nil
	}
	return &middleRef{ID: p.ID, FirstLine: o.Middle.First, LastLine: o.Middle.Last}
}

func newPollReply(p *procs.Process, o procs.Output, budget int) pollReply {
	out, errb := clipOutput(o.Stdout, o.Stderr, budget)
	omitted := out.omitted + errb.omitted
	return pollReply{Status: o.Info.Status, Stdout: string(out.data), Stderr: string(errb.data), Cursor: o.Cursor,
		ExitCode: o.Info.ExitCode, Termination: o.Termination, Missed: o.Missed,
		Truncated: omitted > 0, OmittedBytes: omitted, Middle: middleOf(p, o)}
}

// waitYield waits until p has ended, yield has passed, or the request
// (ctx) ended, and reports whether the request is still there.
func waitYield(ctx context.Context, p *procs.Process, yield time.Duration) bool {
	if yield <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(yield)
	defer t.Stop()
	select {
	case <-p.Done():
	case <-t.C:
	case <-ctx.Done():
		return false
	}
	return true
}

// handleRunYield serves POST /run with yield_ms: the command starts as a
// background process that keeps its output for polls. If it ends within
// yield_ms, the reply is /run's, plus termination; otherwise it comes at
// yield_ms, {"status":"running","id",...} with the output so far, and the
// command goes on as that process, listed, killable and polled with
// /poll_process. A client that leaves first has its group killed, as for
// /run. A session's command commits its state when it ends, whenever that
// is.
func (s *Server) handleRunYield(w http.ResponseWriter, r *http.Request, req commandRequest, budget int) error {
	yield, err := yieldOf(req.YieldMS)
	if err != nil {
		return err
	}
	y, err := s.startYield(r.Context(), req, yield)
	if err != nil {
		return err
	}
	p := y.p
	o, err := p.ReadOutput(nil, s.procs.PollBytes(), budget)
	if err != nil {
		return err
	}
	if o.Info.Status == procs.StatusRunning {
		reply := newPollReply(p, o, budget)
		reply.ID = p.ID
		encode(w, http.StatusOK, reply)
		return nil
	}
	if !y.gone {
		// It ended within yield_ms: this reply is its whole result, and
		// it is nobody's background process. (One whose client left stays
		// listed, so that its later readers see client_gone.)
		s.procs.Forget(p.ID)
	}
	writeRunEnded(w, o, budget, y.timeout, *y.sessionErr)
	return nil
}

// yieldRun is a command of /run with yield_ms (or of the MCP tool exec)
// once it has ended or yield_ms has passed.
type yieldRun struct {
	p       *procs.Process
	gone    bool // ctx ended first: the command was killed, and has ended
	timeout time.Duration
	// sessionErr is written by the command's OnExit: read it once p is
	// done.
	sessionErr *string
}

// startYield starts req's command as a background process that keeps its
// output for polls, and waits until it ends, yield passes, or ctx ends
// (which kills it: its later readers see client_gone).
func (s *Server) startYield(ctx context.Context, req commandRequest, yield time.Duration) (yieldRun, error) {
	c, err := req.command()
	if err != nil {
		return yieldRun{}, err
	}
	if err := req.checkNoProcessOptions(); err != nil {
		return yieldRun{}, err
	}
	c, call, err := s.sessionCommand(req.Session, string(req.User), c, true)
	if err != nil {
		return yieldRun{}, err
	}
	y := yieldRun{timeout: c.Timeout, sessionErr: new(string)}
	var onExit func(executor.Result)
	if call != nil {
		onExit = func(res executor.Result) {
			if err := call.Finish(&res); err != nil {
				*y.sessionErr = err.Error()
			}
		}
	}
	shown := executor.Command{Cmd: req.Cmd, Argv: req.Argv}.String()
	y.p, err = s.procs.StartWith(c, procs.StartOptions{Polled: true, OnExit: onExit, Command: shown})
	if err != nil {
		_ = call.Finish(nil) // nothing ran, nothing to commit
		if isClientStartError(err) || errors.Is(err, procs.ErrTooMany) {
			return yieldRun{}, err
		}
		return yieldRun{}, startError(err)
	}
	if y.gone = !waitYield(ctx, y.p, yield); y.gone {
		y.p.Abandon()
		<-y.p.Done() // the reply, which nobody reads, says client_gone as /run's says what it says
	}
	return y, nil
}

// writeRunEnded writes /run's reply for a command of /run with yield_ms
// that has ended, o being all of its output: as /run's, within budget,
// plus termination.
func writeRunEnded(w http.ResponseWriter, o procs.Output, budget int, timeout time.Duration, sessionErr string) {
	out := executor.Output{Result: o.Result}
	stdout, stderr := clipOutput(o.Stdout, o.Stderr, budget)
	out.Stdout, out.Stderr = stdout.data, stderr.data
	omitted := stdout.omitted + stderr.omitted
	out.Truncated = out.Truncated || omitted > 0 || o.Missed > 0
	var msg string
	switch {
	case out.TimedOut:
		msg = timeoutMessage(timeout)
	case out.Code != 0:
		msg = "Non-zero exit code"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = writeRunReplyMore(w, &out, msg, sessionErr, appendRunExtra(nil, o.Termination, omitted, o.Missed, nil))
}

// handleProcessPoll serves POST /poll_process: it writes input to the
// process's stdin (then closes it, if asked), waits until the process
// ends or yield_ms passes, whichever is first, and replies with the
// output since cursor (or since its last reply for that process).
func (s *Server) handleProcessPoll(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		ID             string   `json:"id"`
		Cursor         *int64   `json:"cursor"`
		YieldMS        *float64 `json:"yield_ms"`
		Input          string   `json:"input"`
		CloseStdin     bool     `json:"close_stdin"`
		MaxOutputBytes *int     `json:"max_output_bytes"`
	}
	req, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	if req.ID == "" {
		return errorf(http.StatusBadRequest, "id is required")
	}
	yield, err := yieldOf(req.YieldMS)
	if err != nil {
		return err
	}
	budget, err := outputBudget(req.MaxOutputBytes)
	if err != nil {
		return err
	}
	p, err := s.procs.Get(req.ID)
	if err != nil {
		return stdinError(0, err) // 404, where /kill_process's is the first API's 400
	}
	p.Keep(s.procs.PollBytes()) // before the input: what it brings is this poll's
	if err := s.pollInput(r.Context(), p, req.Input, req.CloseStdin, max(yield, minInputStall)); err != nil {
		return err
	}
	// The output is read at the end: the wait is bounded by yield_ms
	// whatever the process prints meanwhile.
	_ = waitYield(r.Context(), p, yield) // a client that left gets its reply at once, to nobody
	o, err := p.ReadOutput(req.Cursor, s.procs.PollBytes(), budget)
	if errors.Is(err, procs.ErrCursor) {
		return errorf(http.StatusBadRequest, "%s", err.Error())
	}
	if err != nil {
		return err
	}
	encode(w, http.StatusOK, newPollReply(p, o, budget))
	return nil
}

// minInputStall is the least time a poll's input waits for a process
// that reads none of it.
const minInputStall = time.Second

// pollInput writes input to p's stdin and closes it if asked; see
// stdinError for the replies to a process whose stdin cannot take it. A
// process that reads none of the input for stall (about as long as the
// poll's yield) gets 409: an agent's poll does not hang on a full pipe.
func (s *Server) pollInput(ctx context.Context, p *procs.Process, input string, closeStdin bool, stall time.Duration) error {
	if input != "" {
		n, err := p.WriteStdin(ctx, strings.NewReader(input), stall)
		if errors.Is(err, executor.ErrStdinStalled) {
			return withWritten(n, errorf(http.StatusConflict, "the process read none of its stdin for %s", stall))
		}
		if err != nil {
			return stdinError(n, err)
		}
	}
	if closeStdin {
		if err := p.CloseStdin(); err != nil {
			return stdinError(0, err)
		}
	}
	return nil
}
