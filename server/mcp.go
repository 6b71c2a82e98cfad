package server

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sandbox-executor/sandbox-executor/mcp"
)

// The Model Context Protocol endpoint, POST /mcp: Streamable HTTP,
// stateless (see package mcp). The token is checked before the router, as
// for every endpoint; the tools are in mcp_tools.go.

// MCPConfig holds the settings of /mcp.
type MCPConfig struct {
	// Off serves no /mcp: it is then 404 like any unknown path.
	Off bool
	// Tools, if not empty, are the only tools offered; a name that is no
	// tool is refused by New's caller through CheckMCPTools.
	Tools []string
	// Origins are the origins (scheme://host[:port]) a browser may call
	// /mcp from, besides the agent's own address: an edge in front of
	// the agent that serves a web client names its origin here. A request
	// with any other Origin header is 403, as the transport requires
	// against DNS rebinding; one with none (every non-browser client) is
	// served.
	Origins []string
}

// CheckMCPTools returns an error naming the first of names that is no
// tool, for the agent to refuse to start with.
func CheckMCPTools(names []string) error {
	known := map[string]bool{}
	for _, n := range mcpToolNames() {
		known[n] = true
	}
	for _, n := range names {
		if !known[n] {
			return fmt.Errorf("unknown MCP tool %q (the tools are %s)", n, strings.Join(mcpToolNames(), ", "))
		}
	}
	return nil
}

// newMCP returns the protocol server of s's tools, those of cfg.Tools if
// it names any.
func (s *Server) newMCP() *mcp.Server {
	tools := s.mcpTools()
	if len(s.cfg.MCP.Tools) > 0 {
		keep := tools[:0]
		for _, t := range tools {
			for _, n := range s.cfg.MCP.Tools {
				if t.Name == n {
					keep = append(keep, t)
					break
				}
			}
		}
		tools = keep
	}
	m := mcp.NewServer("sandbox-executor", s.cfg.Version, tools)
	m.Instructions = mcpInstructions
	m.OnCall = s.logToolCall
	return m
}

const mcpInstructions = "Tools to work inside a sandbox: commands, files and background processes. " +
	"Paths are absolute or relative to the agent's working directory."

// logToolCall writes the one log line of a tool call: never its arguments,
// which carry file contents and environment values.
func (s *Server) logToolCall(ctx context.Context, tool string, d time.Duration, isError bool) {
	id := ""
	if st, ok := ctx.Value(stateKey{}).(*requestState); ok {
		id = st.id
	}
	s.log.Info().Str("request_id", id).Str("tool", tool).
		Float64("duration_ms", float64(d.Microseconds())/1000).Bool("is_error", isError).Msg("mcp tool call")
}

// handleMCPPost serves POST /mcp: one JSON-RPC message in, its reply out
// as JSON (202 with no body for a notification).
func (s *Server) handleMCPPost(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkOrigin(r); err != nil {
		return err
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		return errorf(http.StatusUnsupportedMediaType, "POST /mcp takes Content-Type: application/json")
	}
	msg, err := decode[json.RawMessage](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	ctx := context.WithValue(r.Context(), originKey{}, s.requestOrigin(r))
	reply := s.mcp().Serve(ctx, msg, mcp.Headers{
		ProtocolVersion: r.Header.Get("MCP-Protocol-Version"),
		Method:          r.Header.Get("Mcp-Method"),
		Name:            r.Header.Get("Mcp-Name"),
	})
	if reply.Body == nil {
		w.WriteHeader(reply.Status)
		return nil
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(reply.Status)
	_, _ = w.Write(append(reply.Body, '\n'))
	return nil
}

// handleMCPOther serves GET and DELETE /mcp, and every other method: a
// stateless server has no stream to open and no session to end.
func (s *Server) handleMCPOther(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkOrigin(r); err != nil {
		return err
	}
	w.Header().Set("Allow", http.MethodPost)
	return errorf(http.StatusMethodNotAllowed, "method %s not allowed for /mcp: it takes POST only (a stateless server has no stream and no session)", r.Method)
}

// checkOrigin refuses a request whose Origin header names neither the
// agent's own address nor one of MCPConfig.Origins.
func (s *Server) checkOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	for _, o := range s.cfg.MCP.Origins {
		if strings.EqualFold(strings.TrimRight(o, "/"), origin) {
			return nil
		}
	}
	u, err := url.Parse(origin)
	host := r.Host
	if s.cfg.TrustForwardedHost {
		if fh := lastForwarded(r.Header, "X-Forwarded-Host"); fh != "" {
			host = fh
		}
	}
	if err == nil && u.Host != "" && strings.EqualFold(u.Host, host) {
		return nil
	}
	return errorf(http.StatusForbidden, "origin %q may not call /mcp (see the -mcp-origins setting)", origin)
}
