package server

import (
	"net/http"
	"strconv"
	"time"
)

// handleHealth serves GET and HEAD /health, which need no token (net/http
// sends HEAD the headers of GET, Content-Length included, and no body). uptime is whole
// seconds and proxy_port a string: the platform CLI decodes them into an
// int64 and a string.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) error {
	encode(w, http.StatusOK, map[string]any{
		"status":     "ok",
		"version":    s.cfg.Version,
		"uptime":     int64(time.Since(s.started).Seconds()),
		"proxy_port": strconv.Itoa(s.cfg.ProxyPort),
	})
	return nil
}
