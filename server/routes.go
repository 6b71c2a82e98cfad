package server

import (
	"net/http"
)

// routes registers the whole API. Authentication and access logging wrap
// the router as a whole (see New).
func (s *Server) routes() {
	s.router.NotFoundHandler = s.wrap(func(w http.ResponseWriter, r *http.Request) error {
		return errorf(http.StatusNotFound, "no such endpoint: %s", r.URL.Path)
	})
	s.router.MethodNotAllowedHandler = s.wrap(func(w http.ResponseWriter, r *http.Request) error {
		return errorf(http.StatusMethodNotAllowed, "method %s not allowed for %s", r.Method, r.URL.Path)
	})
	get, post, head, put := http.MethodGet, http.MethodPost, http.MethodHead, http.MethodPut
	r := s.router

	// Previews by path come first: mux tries the routes in order, and a
	// page load sends dozens of these at once, where each API call is one.
	r.Handle("/proxy/{port:[0-9]+}", s.wrap(s.handlePreviewRoot)).Methods(get, http.MethodHead)
	// Any method, WebDAV's and other extensions' too: the document lists
	// those it can name and says so with x-any-method.
	r.Handle("/proxy/{port:[0-9]+}/{rest:.*}", s.wrap(s.handlePreviewPath))

	// HEAD too: load balancers and uptime checkers send it.
	r.Handle("/health", s.wrap(s.handleHealth)).Methods(get, http.MethodHead)
	r.Handle("/openapi.yaml", s.wrap(s.handleOpenAPI)).Methods(get)

	r.Handle("/run", s.wrap(s.handleRun)).Methods(post)
	r.Handle("/run_streaming", s.wrap(s.handleRunStreaming)).Methods(post)

	r.Handle("/start_process", s.wrap(s.handleProcessStart)).Methods(post)
	r.Handle("/list_processes", s.wrap(s.handleProcessList)).Methods(get)
	r.Handle("/kill_process", s.wrap(s.handleProcessKill)).Methods(post)
	r.Handle("/process_logs_streaming", s.wrap(s.handleProcessLogs)).Methods(get, post)

	r.Handle("/write_stdin", s.wrap(s.handleStdinWrite)).Methods(post)
	r.Handle("/close_stdin", s.wrap(s.handleStdinClose)).Methods(post)

	r.Handle("/write_file", s.wrap(s.handleFileWrite)).Methods(post)
	r.Handle("/read_file", s.wrap(s.handleFileRead)).Methods(post)
	r.Handle("/delete_file", s.wrap(s.handleFileDelete)).Methods(post)
	r.Handle("/stat_file", s.wrap(s.handleFileStat)).Methods(post)
	r.Handle("/make_dir", s.wrap(s.handleDirMake)).Methods(post)
	r.Handle("/delete_dir", s.wrap(s.handleDirDelete)).Methods(post)
	r.Handle("/list_dir", s.wrap(s.handleDirList)).Methods(post)

	r.Handle("/create_session", s.wrap(s.handleSessionCreate)).Methods(post)
	r.Handle("/list_sessions", s.wrap(s.handleSessionList)).Methods(get)
	r.Handle("/delete_session", s.wrap(s.handleSessionDelete)).Methods(post)

	// Streaming file transfer: files_stream.go and files_upload.go.
	r.Handle("/files", s.wrap(s.handleFilesGet)).Methods(get, head)
	r.Handle("/files", s.wrap(s.handleFilesPut)).Methods(put)
	r.Handle("/files", s.wrap(s.handleFilesPost)).Methods(post)

	r.Handle("/bind_port", s.wrap(s.handlePortBind)).Methods(post)
	r.Handle("/unbind_port", s.wrap(s.handlePortUnbind)).Methods(post)
	r.Handle("/port_status", s.wrap(s.handlePortStatus)).Methods(get)

	r.Handle("/start_terminal", s.wrap(s.handleTerminalStart)).Methods(post)
	r.Handle("/list_terminals", s.wrap(s.handleTerminalList)).Methods(get)
	r.Handle("/resize_terminal", s.wrap(s.handleTerminalResize)).Methods(post)
	r.Handle("/kill_terminal", s.wrap(s.handleTerminalKill)).Methods(post)
	r.Handle("/terminal_ws", s.wrap(s.handleTerminalWS)).Methods(get)

	// Metrics (metrics.go, stats.go): /metrics is open with
	// Config.MetricsOpen, /stats never.
	r.Handle("/metrics", s.wrap(s.handleMetrics)).Methods(get)
	r.Handle("/stats", s.wrap(s.handleStats)).Methods(get)

	// Tunnels and exposed ports. CONNECT tunnels and previews by host
	// name are served in front of the router: see serveConnect and
	// routeHost; previews by path are the first routes.
	r.Handle("/expose_port", s.wrap(s.handleExposePort)).Methods(post)
	r.Handle("/unexpose_port", s.wrap(s.handleUnexposePort)).Methods(post)
	r.Handle("/list_exposed_ports", s.wrap(s.handleExposedList)).Methods(get)
	r.Handle("/tunnel_ws", s.wrap(s.handleTunnelWS)).Methods(get)
	r.Handle("/list_tunnels", s.wrap(s.handleTunnelList)).Methods(get)
}
