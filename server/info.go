package server

import "net/http"

// handleInfo serves GET /info: what this agent can do, so that a client
// knows before it asks. limits says which per-command limits it applies
// and by what mechanism, as probed once at start-up.
func (s *Server) handleInfo(w http.ResponseWriter, r *http.Request) error {
	encode(w, http.StatusOK, map[string]any{
		"version": s.cfg.Version,
		"limits":  s.runner.LimitSupport(),
	})
	return nil
}
