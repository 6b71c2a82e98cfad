package server

import (
	"net/http"
)

// requestPath returns the layers every request goes through, the first
// the outermost. Two kinds of request leave before the router: CONNECT
// (serveConnect) and previews by host name (routeHost).
func (s *Server) requestPath() http.Handler {
	return chain(s.router,
		s.access,       // the request's id and state; its access-log line and metrics once over; 414 for a long request line
		s.serveConnect, // CONNECT tunnels leave here: an authority-form target (127.0.0.1:22) has no path to route
		s.routeHost,    // previews by host name leave here, to the app, with their path as sent
		s.routePath,    // the path cleaned ("//run" as /run), and the base path cut
		s.requireToken, // the bearer token, before the router, so that 404 and 405 need it too
	)
}

// chain returns h inside layers, the first the outermost.
func chain(h http.Handler, layers ...func(http.Handler) http.Handler) http.Handler {
	for i := len(layers) - 1; i >= 0; i-- {
		h = layers[i](h)
	}
	return h
}

// routes registers the whole API on the router; requestPath puts the
// layers around it.
func (s *Server) routes() {
	// Labels every matched request with its route's template, for the
	// metrics.
	s.router.matched = s.labelRoute
	s.router.NotFoundHandler = s.wrap(func(w http.ResponseWriter, r *http.Request) error {
		return errorf(http.StatusNotFound, "no such endpoint: %s", r.URL.Path)
	})
	s.router.MethodNotAllowedHandler = s.wrap(func(w http.ResponseWriter, r *http.Request) error {
		return errorf(http.StatusMethodNotAllowed, "method %s not allowed for %s", r.Method, r.URL.Path)
	})
	get, post, head, put := http.MethodGet, http.MethodPost, http.MethodHead, http.MethodPut
	r := s.router

	// Previews by path: a page load sends dozens of these at once.
	r.Handle("/proxy/{port:[0-9]+}", s.wrap(s.handlePreviewRoot)).Methods(get, http.MethodHead)
	// Any method, WebDAV's and other extensions' too: the document lists
	// those it can name and says so with x-any-method.
	r.Handle("/proxy/{port:[0-9]+}/{rest:.*}", s.wrap(s.handlePreviewPath))

	// HEAD too: load balancers and uptime checkers send it.
	r.Handle("/health", s.wrap(s.handleHealth)).Methods(get, http.MethodHead)
	r.Handle("/openapi.yaml", s.wrap(s.handleOpenAPI)).Methods(get)
	r.Handle("/info", s.wrap(s.handleInfo)).Methods(get)

	r.Handle("/run", s.wrap(s.handleRun)).Methods(post)
	r.Handle("/run_streaming", s.wrap(s.handleRunStreaming)).Methods(post)

	r.Handle("/start_process", s.wrap(s.handleProcessStart)).Methods(post)
	r.Handle("/list_processes", s.wrap(s.handleProcessList)).Methods(get)
	r.Handle("/kill_process", s.wrap(s.handleProcessKill)).Methods(post)
	r.Handle("/process_logs_streaming", s.wrap(s.handleProcessLogs)).Methods(get, post)
	r.Handle("/process_status", s.wrap(s.handleProcessStatus)).Methods(get)
	r.Handle("/wait_for_port", s.wrap(s.handleWaitForPort)).Methods(post)

	r.Handle("/write_stdin", s.wrap(s.handleStdinWrite)).Methods(post)
	r.Handle("/close_stdin", s.wrap(s.handleStdinClose)).Methods(post)
	r.Handle("/poll_process", s.wrap(s.handleProcessPoll)).Methods(post)

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

	// Workspace tools (search.go, edit.go): statuses as /files answers.
	r.Handle("/grep", s.wrap(s.handleGrep)).Methods(post)
	r.Handle("/find_files", s.wrap(s.handleFindFiles)).Methods(post)
	r.Handle("/edit_file", s.wrap(s.handleFileEdit)).Methods(post)
	r.Handle("/apply_patch", s.wrap(s.handlePatchApply)).Methods(post)
	r.Handle("/move_path", s.wrap(s.handlePathMove)).Methods(post)
	r.Handle("/copy_path", s.wrap(s.handlePathCopy)).Methods(post)
	r.Handle("/chmod_path", s.wrap(s.handlePathChmod)).Methods(post)

	r.Handle("/bind_port", s.wrap(s.handlePortBind)).Methods(post)
	r.Handle("/unbind_port", s.wrap(s.handlePortUnbind)).Methods(post)
	r.Handle("/port_status", s.wrap(s.handlePortStatus)).Methods(get)

	r.Handle("/start_terminal", s.wrap(s.handleTerminalStart)).Methods(post)
	r.Handle("/list_terminals", s.wrap(s.handleTerminalList)).Methods(get)
	r.Handle("/resize_terminal", s.wrap(s.handleTerminalResize)).Methods(post)
	r.Handle("/kill_terminal", s.wrap(s.handleTerminalKill)).Methods(post)
	r.Handle("/terminal_ws", s.wrap(s.handleTerminalWS)).Methods(get)

	r.Handle("/exec_ws", s.wrap(s.handleExecWS)).Methods(get)

	// Metrics (metrics.go, stats.go): /metrics is open with
	// Config.MetricsOpen, /stats never.
	r.Handle("/metrics", s.wrap(s.handleMetrics)).Methods(get)
	r.Handle("/stats", s.wrap(s.handleStats)).Methods(get)

	// Tunnels and exposed ports. CONNECT tunnels and previews by host
	// name are served in front of the router (see requestPath); previews
	// by path are the first routes.
	r.Handle("/expose_port", s.wrap(s.handlePortExpose)).Methods(post)
	r.Handle("/unexpose_port", s.wrap(s.handlePortUnexpose)).Methods(post)
	r.Handle("/list_exposed_ports", s.wrap(s.handlePortListExposed)).Methods(get)
	r.Handle("/tunnel_ws", s.wrap(s.handleTunnelWS)).Methods(get)
	r.Handle("/list_tunnels", s.wrap(s.handleTunnelList)).Methods(get)

	// The Model Context Protocol (mcp.go): POST only, every other method
	// 405 with Allow; absent (404) with Config.MCP.Off.
	if s.mcp != nil {
		r.Handle("/mcp", s.wrap(s.handleMCPPost)).Methods(post)
		r.Handle("/mcp", s.wrap(s.handleMCPOther))
	}

	// Code contexts: interpreters whose state lasts between calls.
	r.Handle("/create_context", s.wrap(s.handleContextCreate)).Methods(post)
	r.Handle("/run_code", s.wrap(s.handleContextRunCode)).Methods(post)
	r.Handle("/interrupt_context", s.wrap(s.handleContextInterrupt)).Methods(post)
	r.Handle("/context_status", s.wrap(s.handleContextStatus)).Methods(get)
	r.Handle("/list_contexts", s.wrap(s.handleContextList)).Methods(get)
	r.Handle("/delete_context", s.wrap(s.handleContextDelete)).Methods(post)

	// Watches (watch.go, watches.go).
	r.Handle("/watch", s.wrap(s.handleWatch)).Methods(get, post)
	r.Handle("/watches", s.wrap(s.handleWatchCreate)).Methods(post)
	r.Handle("/watches/{id}/events", s.wrap(s.handleWatchEvents)).Methods(get)
	r.Handle("/watches/{id}", s.wrap(s.handleWatchDelete)).Methods(http.MethodDelete)
	r.Handle("/wait_for_path", s.wrap(s.handleWaitForPath)).Methods(post)

	// Checkpoints (checkpoints.go).
	r.Handle("/create_checkpoint", s.wrap(s.handleCheckpointCreate)).Methods(post)
	r.Handle("/changes", s.wrap(s.handleCheckpointChanges)).Methods(get)
	r.Handle("/restore_checkpoint", s.wrap(s.handleCheckpointRestore)).Methods(post)
	r.Handle("/list_checkpoints", s.wrap(s.handleCheckpointList)).Methods(get)
	r.Handle("/delete_checkpoint", s.wrap(s.handleCheckpointDelete)).Methods(post)
}
