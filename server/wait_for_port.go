package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-executor/sandbox-executor/procs"
	"github.com/sandbox-executor/sandbox-executor/readiness"
)

// maxReadyTimeout bounds the timeout of a readiness wait, in seconds.
const maxReadyTimeout = 3600

// readyRequest is what "ready" means for a port: the body of
// /wait_for_port, and /start_process's "ready".
type readyRequest struct {
	Port    *int           `json:"port"`
	Mode    string         `json:"mode"`
	Path    string         `json:"path"`
	Status  stringOrNumber `json:"status"` // "200-399", or one status
	Timeout *float64       `json:"timeout"`
}

// spec validates req and returns its readiness.Spec. A port is required
// unless portOptional.
func (req readyRequest) spec(portOptional bool) (readiness.Spec, error) {
	var s readiness.Spec
	switch {
	case req.Port == nil && portOptional:
	case req.Port == nil:
		return s, errorf(http.StatusBadRequest, "port is required")
	case *req.Port < 1 || *req.Port > 65535:
		return s, errorf(http.StatusBadRequest, "port must be between 1 and 65535")
	default:
		s.Port = *req.Port
	}
	switch req.Mode {
	case "", readiness.ModeTCP:
		s.Mode = readiness.ModeTCP
	case readiness.ModeHTTP:
		s.Mode = readiness.ModeHTTP
	default:
		return s, errorf(http.StatusBadRequest, `mode must be "tcp" or "http"`)
	}
	if req.Path != "" && !strings.HasPrefix(req.Path, "/") {
		return s, errorf(http.StatusBadRequest, `path must start with "/"`)
	}
	s.Path = req.Path
	var err error
	if s.StatusMin, s.StatusMax, err = statusRange(string(req.Status)); err != nil {
		return s, err
	}
	if req.Timeout != nil && (*req.Timeout <= 0 || *req.Timeout > maxReadyTimeout) {
		return s, errorf(http.StatusBadRequest, "timeout must be a number of seconds above 0 and at most %d", maxReadyTimeout)
	}
	if req.Timeout != nil {
		s.Timeout = time.Duration(*req.Timeout * float64(time.Second))
	}
	return s, nil
}

// statusRange parses "200-399" or "204"; empty is 0, 0 (the default).
func statusRange(v string) (lo, hi int, err error) {
	if v == "" {
		return 0, 0, nil
	}
	a, b, isRange := strings.Cut(v, "-")
	lo, err1 := strconv.Atoi(strings.TrimSpace(a))
	hi, err2 := lo, error(nil)
	if isRange {
		hi, err2 = strconv.Atoi(strings.TrimSpace(b))
	}
	if err1 != nil || err2 != nil || lo < 100 || hi > 599 || lo > hi {
		return 0, 0, errorf(http.StatusBadRequest, `status must be a status or a range of them, such as "200-399"`)
	}
	return lo, hi, nil
}

// parseReady reads /start_process's "ready": absent or null is none.
func parseReady(raw json.RawMessage) (*readiness.Spec, error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var req readyRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return nil, errorf(http.StatusBadRequest, "ready must be an object: {\"port\", \"mode\"?, \"path\"?, \"status\"?, \"timeout\"?}")
	}
	s, err := req.spec(false)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "ready: %s", err.Error())
	}
	return &s, nil
}

// waitReply is the reply of /wait_for_port: HTTP 200 whether or not the
// port is ready; the answer is in the body.
type waitReply struct {
	Ready     bool   `json:"ready"`
	Port      int    `json:"port,omitempty"`
	WaitedMS  *int64 `json:"waited_ms,omitempty"`
	Address   string `json:"address,omitempty"`
	Reason    string `json:"reason,omitempty"`
	ExitCode  *int   `json:"exit_code,omitempty"`
	LastError string `json:"last_error,omitempty"`
}

// handleWaitForPort serves POST /wait_for_port: it answers as soon as the
// port is ready, its process (process_id) has ended, or the timeout has
// passed. With a process_id whose process was started with "ready" and no
// port of its own, it waits for that probe.
func (s *Server) handleWaitForPort(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		readyRequest
		ProcessID string `json:"process_id"`
	}
	req, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	res, port, p, err := s.waitForPort(r.Context(), req.readyRequest, req.ProcessID)
	if err != nil {
		return err
	}
	if res.Reason == readiness.ReasonGone {
		return nil // the client left, or the agent stops
	}
	encode(w, http.StatusOK, waitReplyOf(res, port, p))
	return nil
}

// waitForPort waits as /wait_for_port does (and the MCP tool
// wait_for_port): for req's port, or, with the process processID started
// with "ready" and no port given, for that process's own probe. It
// returns the port waited for and the process (nil without processID);
// the Reason readiness.ReasonGone means ctx ended first.
func (s *Server) waitForPort(ctx context.Context, req readyRequest, processID string) (readiness.Result, int, *procs.Process, error) {
	var p *procs.Process
	if processID != "" {
		var err error
		if p, err = s.procs.Get(processID); errors.Is(err, procs.ErrNotFound) {
			return readiness.Result{}, 0, nil, errorf(http.StatusNotFound, "%s", err.Error())
		} else if err != nil {
			return readiness.Result{}, 0, nil, err
		}
	}
	probed := false
	if p != nil {
		_, probed = p.Ready()
	}
	spec, err := req.spec(probed)
	if err != nil {
		return readiness.Result{}, 0, nil, err
	}
	if spec.Port == 0 { // the process's own probe
		res, port := s.waitProcessProbe(ctx, p, spec.Timeout)
		return res, port, p, nil
	}
	var exited <-chan struct{}
	if p != nil {
		exited = p.Done()
	}
	return readiness.Wait(ctx, spec, exited), spec.Port, p, nil
}

// waitProcessProbe waits for p's own readiness probe, for at most timeout
// (30 s if zero).
func (s *Server) waitProcessProbe(reqCtx context.Context, p *procs.Process, timeout time.Duration) (readiness.Result, int) {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(reqCtx, timeout)
	defer cancel()
	st, _ := p.WaitReady(ctx)
	res := st.Result
	switch {
	case st.Ready:
	case reqCtx.Err() != nil:
		res.Reason = readiness.ReasonGone
	case p.Info().Status != procs.StatusRunning:
		res.Reason = readiness.ReasonExited
	case !st.Ended:
		res.Reason, res.LastError = readiness.ReasonTimeout, "the process's ready probe has not passed yet"
	}
	res.Waited = time.Since(start)
	return res, st.Spec.Port
}

func waitReplyOf(res readiness.Result, port int, p *procs.Process) waitReply {
	if res.Ready {
		ms := res.Waited.Milliseconds()
		return waitReply{Ready: true, Port: port, WaitedMS: &ms, Address: res.Address}
	}
	rep := waitReply{Reason: res.Reason, LastError: res.LastError}
	if res.Reason == readiness.ReasonExited && p != nil {
		rep.LastError = "" // the exit says it all
		<-p.Done()         // closed already, or about to be: the exit was seen
		rep.ExitCode = p.Info().ExitCode
	}
	if res.Reason == readiness.ReasonTimeout && rep.LastError == "" {
		rep.LastError = "no probe answered"
	}
	return rep
}
