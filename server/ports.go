package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/sandbox-executor/sandbox-executor/proxy"
)

// handlePortBind serves POST /bind_port: the TCP proxy forwards PROXY_PORT
// to the given port. A second bind is 409 with the current port. The
// agent's own ports (API and proxy) are 400: the proxy bound to itself
// would loop on the first connection until no descriptor is left.
func (s *Server) handlePortBind(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		Port json.RawMessage `json:"port"` // parsed by parsePort, which needs the text as sent
	}
	req, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	port, err := parsePort(req.Port)
	if err != nil {
		return err
	}
	switch port {
	case s.cfg.ProxyPort:
		return errorf(http.StatusBadRequest, "port %d is the agent's own TCP proxy port", port)
	case s.cfg.APIPort:
		return errorf(http.StatusBadRequest, "port %d is the agent's own API port", port)
	}
	if err := s.fwd.Bind(port); err != nil {
		switch {
		case errors.Is(err, proxy.ErrAlreadyBound):
			current, _ := s.fwd.Port()
			return &httpError{code: http.StatusConflict, msg: "Port already bound",
				extra: map[string]any{"success": false, "current_port": strconv.Itoa(current)}}
		case errors.Is(err, proxy.ErrReservedPort):
			return errorf(http.StatusBadRequest, "port %d is reserved by the agent", port)
		}
		return err
	}
	encode(w, http.StatusOK, map[string]any{"success": true, "message": "Port binding configured",
		"port": strconv.Itoa(port), "proxy_port": strconv.Itoa(s.cfg.ProxyPort)})
	return nil
}

// parsePort reads bind_port's port: a JSON number or a string, either
// written in plain decimal digits without a leading zero, between 1 and
// 65535. Anything else (" 8080", "08080", "+80", "8080.0", 8e3) is a 400
// rather than a guess at what was meant. Missing, null or "" is "port is
// required".
func parsePort(raw json.RawMessage) (int, error) {
	text := string(raw)
	switch {
	case len(raw) == 0 || text == "null":
		return 0, errorf(http.StatusBadRequest, "port is required")
	case raw[0] == '"':
		if err := json.Unmarshal(raw, &text); err != nil {
			return 0, errorf(http.StatusBadRequest, "invalid request: field \"port\" must be a string or a number")
		}
		if text == "" {
			return 0, errorf(http.StatusBadRequest, "port is required")
		}
	case raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9': // a number; the decoder has checked its syntax
	default:
		return 0, errorf(http.StatusBadRequest, "invalid request: field \"port\" must be a string or a number")
	}
	return portFromText(text)
}

// portFromText reads a port written in plain decimal digits without a
// leading zero, between 1 and 65535; anything else is a 400. Empty is
// "port is required".
func portFromText(text string) (int, error) {
	if text == "" {
		return 0, errorf(http.StatusBadRequest, "port is required")
	}
	invalid := errorf(http.StatusBadRequest, "port must be a number between 1 and 65535, in plain decimal digits")
	if len(text) > len("65535") || text[0] == '0' && len(text) > 1 {
		return 0, invalid
	}
	for _, c := range []byte(text) {
		if c < '0' || c > '9' {
			return 0, invalid
		}
	}
	port, _ := strconv.Atoi(text) // at most five digits: cannot fail
	if port < 1 || port > 65535 {
		return 0, invalid
	}
	return port, nil
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
