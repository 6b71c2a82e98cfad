package client

import (
	"context"
	"net/http"
	"time"
)

// PortWait is what WaitForPort waits for.
type PortWait struct {
	// Port is the port; it may be 0 with a ProcessID whose process was
	// started with a ready probe.
	Port int
	// Mode is "tcp" (a connection is accepted; the default) or "http" (a
	// GET of Path answers with a status within Status).
	Mode   string
	Path   string // "/" if empty
	Status string // "200-399" if empty
	// Timeout bounds the wait; 30 s if zero.
	Timeout time.Duration
	// ProcessID, if set, ends the wait as soon as that process ends.
	ProcessID string
}

// PortReady is the answer of WaitForPort.
type PortReady struct {
	Ready     bool
	Port      int
	Waited    time.Duration
	Address   string // "127.0.0.1" or "::1", when Ready
	Reason    string // "timeout" or "process_exited", when not Ready
	ExitCode  *int   // with "process_exited"
	LastError string // with "timeout"
}

// WaitForPort asks the agent to wait until a port is ready (POST
// /wait_for_port). Not being ready is an answer, not an error.
func (c *Client) WaitForPort(ctx context.Context, w PortWait) (PortReady, error) {
	type request struct {
		Port      int     `json:"port,omitempty"`
		Mode      string  `json:"mode,omitempty"`
		Path      string  `json:"path,omitempty"`
		Status    string  `json:"status,omitempty"`
		Timeout   float64 `json:"timeout,omitempty"`
		ProcessID string  `json:"process_id,omitempty"`
	}
	var r struct {
		Ready     bool   `json:"ready"`
		Port      int    `json:"port"`
		WaitedMS  int64  `json:"waited_ms"`
		Address   string `json:"address"`
		Reason    string `json:"reason"`
		ExitCode  *int   `json:"exit_code"`
		LastError string `json:"last_error"`
	}
	req := request{Port: w.Port, Mode: w.Mode, Path: w.Path, Status: w.Status, Timeout: w.Timeout.Seconds(), ProcessID: w.ProcessID}
	if err := c.call(ctx, http.MethodPost, "/wait_for_port", req, &r); err != nil {
		return PortReady{}, err
	}
	return PortReady{Ready: r.Ready, Port: r.Port, Waited: time.Duration(r.WaitedMS) * time.Millisecond, Address: r.Address,
		Reason: r.Reason, ExitCode: r.ExitCode, LastError: r.LastError}, nil
}
