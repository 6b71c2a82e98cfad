package server

import (
	"io"
	"net/http"

	sandboxexecutor "github.com/sandbox-executor/sandbox-executor"
)

// handleOpenAPI serves GET /openapi.yaml, the API's OpenAPI document, which
// needs no token. application/yaml is the registered YAML media type (RFC
// 9512), which browsers, curl and every OpenAPI tool accept;
// application/openapi+yaml is more precise but newer, and some tools do not
// know it yet.
func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/yaml")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, sandboxexecutor.OpenAPI()) // an error here means the client left
	return nil
}
