package server

import (
	"errors"
	"net/http"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/procs"
)

// processStatus is the reply of /process_status: what list_processes
// items, which keep exactly their keys, cannot carry.
type processStatus struct {
	ID          string                `json:"id"`
	Status      procs.Status          `json:"status"`
	ExitCode    *int                  `json:"exit_code,omitempty"`
	Termination *executor.Termination `json:"termination,omitempty"` // once it has ended
	Limits      *executor.Limits      `json:"limits,omitempty"`      // the limits it runs with, its session's included
	Ready       *bool                 `json:"ready,omitempty"`       // whether its ready probe passed, when it has one
	Restarts    *int                  `json:"restarts,omitempty"`    // how many times it restarted, when it has a policy
}

// handleProcessStatus serves GET /process_status?id=: one background
// process's status, how it ended and the limits it runs with. An unknown
// id is a 404.
func (s *Server) handleProcessStatus(w http.ResponseWriter, r *http.Request) error {
	id := r.URL.Query().Get("id")
	if id == "" {
		return errorf(http.StatusBadRequest, "id is required")
	}
	p, err := s.procs.Get(id)
	if errors.Is(err, procs.ErrNotFound) {
		return errorf(http.StatusNotFound, "%s", err.Error())
	}
	if err != nil {
		return err
	}
	info := p.Info()
	st := processStatus{ID: info.ID, Status: info.Status, ExitCode: info.ExitCode}
	if info.Restarts >= 0 {
		st.Restarts = &info.Restarts
		if info.Result != nil && st.ExitCode == nil { // the last run's exit, while it waits or runs again
			code := info.Result.Code
			st.ExitCode = &code
		}
	}
	if !info.Limits.IsZero() {
		st.Limits = &info.Limits
	}
	if rs, ok := p.Ready(); ok {
		st.Ready = &rs.Ready
	}
	if info.Result != nil {
		st.Termination = p.LastTermination()
	}
	encode(w, http.StatusOK, st)
	return nil
}
