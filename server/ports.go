package server

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/sandbox-executor/sandbox-executor/proxy"
)

// handlePortBind serves POST /bind_port: the TCP proxy forwards PROXY_PORT
// to the given port. A second bind is 409 with the current port.
func (s *Server) handlePortBind(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		Port stringOrNumber `json:"port"`
	}
	req, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	if req.Port == "" {
		return errorf(http.StatusBadRequest, "port is required")
	}
	port, err := strconv.Atoi(string(req.Port))
	if err != nil {
		return errorf(http.StatusBadRequest, "port must be a number between 1 and 65535")
	}
	if err := s.fwd.Bind(port); err != nil {
		if errors.Is(err, proxy.ErrAlreadyBound) {
			current, _ := s.fwd.Port()
			return &httpError{code: http.StatusConflict, msg: "Port already bound",
				extra: map[string]any{"success": false, "current_port": strconv.Itoa(current)}}
		}
		return err
	}
	encode(w, http.StatusOK, map[string]any{"success": true, "message": "Port binding configured",
		"port": strconv.Itoa(port), "proxy_port": strconv.Itoa(s.cfg.ProxyPort)})
	return nil
}

// handlePortUnbind serves POST /unbind_port. It always succeeds, bound or
// not; the optional port field is accepted and not needed.
func (s *Server) handlePortUnbind(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		Port stringOrNumber `json:"port"`
	}
	if _, err := decode[request](w, r, s.cfg.MaxBody); err != nil {
		return err
	}
	s.fwd.Unbind()
	encode(w, http.StatusOK, map[string]any{"success": true, "message": "Port binding removed"})
	return nil
}

// handlePortStatus serves GET /port_status.
func (s *Server) handlePortStatus(w http.ResponseWriter, r *http.Request) error {
	port := ""
	if p, ok := s.fwd.Port(); ok {
		port = strconv.Itoa(p)
	}
	encode(w, http.StatusOK, map[string]any{"success": true, "port": port, "proxy_port": strconv.Itoa(s.cfg.ProxyPort)})
	return nil
}
