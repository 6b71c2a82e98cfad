// Package mcp serves the Model Context Protocol's messages: JSON-RPC,
// version negotiation and tool calls, stateless. It knows nothing of HTTP:
// the caller passes a message and the transport's headers in, and writes
// the Reply's status and body out (server/mcp.go does, for POST /mcp).
//
// It is written against the specification rather than on the official Go
// SDK, which adds about 1.9 MB to the binary (9.5 to 11.4 MB, against a
// 12 MB target that other features share). The SDK's client is what the
// tests check it with.
package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// The protocol versions served. Version2026 has no initialize: each
// request names its version in _meta and the transport's headers.
const (
	Version20250618 = "2025-06-18"
	Version20251125 = "2025-11-25"
	Version20260728 = "2026-07-28"
)

// Versions returns the versions served, the newest first.
func Versions() []string { return []string{Version20260728, Version20251125, Version20250618} }

// JSON-RPC and MCP error codes.
const (
	CodeParseError         = -32700
	CodeInvalidRequest     = -32600
	CodeMethodNotFound     = -32601
	CodeInvalidParams      = -32602
	CodeHeaderMismatch     = -32020
	CodeUnsupportedVersion = -32022
)

// metaVersion is the _meta key that carries a 2026-07-28 request's version.
const metaVersion = "io.modelcontextprotocol/protocolVersion"

// Server answers MCP messages with a fixed set of tools. It keeps no
// state between messages: any request is served without initialize, and
// no session id is ever minted.
type Server struct {
	Name, Version string // serverInfo
	// Instructions, if set, tells the model how to use the tools.
	Instructions string
	// OnCall, if set, is called once per tools/call of a known tool,
	// when it returns: for the caller's log line.
	OnCall func(ctx context.Context, tool string, d time.Duration, isError bool)

	tools  []Tool
	byName map[string]*Tool
	// listResult and listResultModern are tools/list's result, for 2025-x
	// and for 2026-07-28, encoded once: the tools do not change, and
	// their schemas are most of what a list costs.
	listResult, listResultModern json.RawMessage
}

// NewServer returns a Server offering tools, in that order.
func NewServer(name, version string, tools []Tool) *Server {
	s := &Server{Name: name, Version: version, tools: tools, byName: make(map[string]*Tool, len(tools))}
	list := make([]map[string]any, len(tools))
	for i := range s.tools {
		s.byName[s.tools[i].Name] = &s.tools[i]
		list[i] = s.tools[i].wire()
	}
	// Maps of strings, schemas and raw JSON: encoding cannot fail.
	s.listResult, _ = json.Marshal(map[string]any{"tools": list})
	s.listResultModern, _ = json.Marshal(withType(map[string]any{"tools": list}, true))
	return s
}

// Headers are the transport's headers that the protocol reads.
type Headers struct {
	ProtocolVersion string // MCP-Protocol-Version
	Method          string // Mcp-Method
	Name            string // Mcp-Name
}

// Reply is the answer to one message: an HTTP status and a JSON body,
// or no body (202) for a notification or a response.
type Reply struct {
	Status int
	Body   []byte
}

type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// rpcError is a JSON-RPC error to send, at an HTTP status.
type rpcError struct {
	status  int
	code    int
	message string
	data    any
}

func (e *rpcError) Error() string { return e.message }

func errorAt(status, code int, format string, args ...any) *rpcError {
	return &rpcError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

// Serve answers msg, one JSON-RPC message, sent with h.
func (s *Server) Serve(ctx context.Context, msg []byte, h Headers) Reply {
	msg = bytes.TrimSpace(msg)
	if len(msg) > 0 && msg[0] == '[' {
		return replyError(nil, errorAt(http.StatusBadRequest, CodeInvalidRequest,
			"JSON-RPC batches are not supported: send one message per request"))
	}
	var req request
	if err := json.Unmarshal(msg, &req); err != nil {
		return replyError(nil, errorAt(http.StatusBadRequest, CodeParseError, "parse error: %v", err))
	}
	if req.JSONRPC != "2.0" {
		return replyError(req.ID, errorAt(http.StatusBadRequest, CodeInvalidRequest, `jsonrpc must be "2.0"`))
	}
	if req.Method == "" || len(req.ID) == 0 || string(req.ID) == "null" {
		// A notification, or a response to a request: this server sends
		// none, so there is nothing to match it to.
		return Reply{Status: http.StatusAccepted}
	}
	res, err := s.serve(ctx, req, h)
	if err != nil {
		return replyError(req.ID, err)
	}
	body, mErr := envelope(req.ID, res)
	if mErr != nil {
		return replyError(req.ID, errorAt(http.StatusInternalServerError, -32603, "internal error"))
	}
	return Reply{Status: http.StatusOK, Body: body}
}

// envelope returns the response of id whose result is res. It is written
// by hand, not by json.Marshal of a map, because Marshal re-validates
// and compacts every json.RawMessage it meets: the whole tool list, at
// every tools/list. id came from json.Unmarshal, so it is valid JSON.
func envelope(id json.RawMessage, res any) ([]byte, error) {
	raw, ok := res.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(res); err != nil {
			return nil, err
		}
	}
	b := make([]byte, 0, len(raw)+len(id)+32)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, raw...)
	return append(b, '}'), nil
}

func replyError(id json.RawMessage, e *rpcError) Reply {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	m := map[string]any{"code": e.code, "message": e.message}
	if e.data != nil {
		m["data"] = e.data
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": m})
	return Reply{Status: e.status, Body: body}
}

// serve answers one request, after its version is checked.
func (s *Server) serve(ctx context.Context, req request, h Headers) (any, *rpcError) {
	modern, err := s.version(req, h)
	if err != nil {
		return nil, err
	}
	switch req.Method {
	case "initialize":
		if modern {
			return nil, errorAt(http.StatusOK, CodeMethodNotFound, "initialize is not part of %s: use server/discover", Version20260728)
		}
		return s.initialize(req.Params), nil
	case "server/discover":
		return s.discover(), nil
	case "ping":
		return withType(map[string]any{}, modern), nil
	case "tools/list":
		if modern {
			return s.listResultModern, nil
		}
		return s.listResult, nil
	case "tools/call":
		return s.call(ctx, req.Params, modern)
	}
	return nil, errorAt(http.StatusOK, CodeMethodNotFound, "method not found: %s", req.Method)
}

func withType(m map[string]any, modern bool) map[string]any {
	if modern {
		m["resultType"] = "complete"
	}
	return m
}

// version reports whether req follows 2026-07-28 (its _meta names a
// version), and checks that version and the headers that must agree with
// it. A request without one follows 2025-x, which needs no initialize
// here either: the server has no state to set up.
func (s *Server) version(req request, h Headers) (modern bool, _ *rpcError) {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(req.Params, &p) // params that are not an object fail in the method
	raw, modern := p.Meta[metaVersion]
	v := h.ProtocolVersion
	if modern {
		if json.Unmarshal(raw, &v) != nil {
			return false, errorAt(http.StatusBadRequest, CodeInvalidParams, "_meta %s must be a string", metaVersion)
		}
	}
	if v == "" {
		return false, nil // 2025-x without the header: the spec's default
	}
	if !contains(Versions(), v) {
		e := errorAt(http.StatusBadRequest, CodeUnsupportedVersion, "unsupported protocol version %q: this server supports %v", v, Versions())
		e.data = map[string]any{"supported": Versions(), "requested": v}
		return false, e
	}
	if !modern {
		if v == Version20260728 {
			return false, errorAt(http.StatusBadRequest, CodeInvalidParams,
				"a %s request names its version in params._meta[%q]", Version20260728, metaVersion)
		}
		return false, nil
	}
	return true, s.checkHeaders(req, h, v)
}

// checkHeaders checks that a 2026-07-28 request's headers repeat its
// body, as the transport requires of them.
func (s *Server) checkHeaders(req request, h Headers, v string) *rpcError {
	mismatch := func(what, got, want string) *rpcError {
		return errorAt(http.StatusBadRequest, CodeHeaderMismatch, "header %s is %q; the message says %q", what, got, want)
	}
	if h.ProtocolVersion != v {
		return mismatch("MCP-Protocol-Version", h.ProtocolVersion, v)
	}
	if h.Method != req.Method {
		return mismatch("Mcp-Method", h.Method, req.Method)
	}
	if req.Method == "tools/call" {
		var p struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(req.Params, &p)
		if h.Name != p.Name {
			return mismatch("Mcp-Name", h.Name, p.Name)
		}
	}
	return nil
}

func (s *Server) capabilities() map[string]any {
	return map[string]any{"tools": map[string]any{"listChanged": false}}
}

func (s *Server) info() map[string]string {
	return map[string]string{"name": s.Name, "version": s.Version}
}

// initialize answers with the client's version if it is a 2025-x one this
// server serves, else the newest 2025-x: the client then decides.
func (s *Server) initialize(params json.RawMessage) any {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(params, &p)
	v := p.ProtocolVersion
	if v != Version20250618 && v != Version20251125 {
		v = Version20251125
	}
	m := map[string]any{"protocolVersion": v, "capabilities": s.capabilities(), "serverInfo": s.info()}
	if s.Instructions != "" {
		m["instructions"] = s.Instructions
	}
	return m
}

func (s *Server) discover() any {
	m := map[string]any{"supportedVersions": Versions(), "capabilities": s.capabilities(),
		"_meta": map[string]any{"io.modelcontextprotocol/serverInfo": s.info()}, "resultType": "complete"}
	if s.Instructions != "" {
		m["instructions"] = s.Instructions
	}
	return m
}

// call runs a tools/call. A call that is not a CallToolRequest, or names
// no tool offered, is a protocol error; arguments that fail the tool's
// schema are a result with isError, which the model can act on.
func (s *Server) call(ctx context.Context, params json.RawMessage, modern bool) (any, *rpcError) {
	var p struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.Name == nil {
		return nil, errorAt(http.StatusOK, CodeInvalidParams, "tools/call needs params {name, arguments?}")
	}
	t, ok := s.byName[*p.Name]
	if !ok {
		return nil, errorAt(http.StatusOK, CodeInvalidParams, "unknown tool: %q", *p.Name)
	}
	args := map[string]json.RawMessage{}
	if len(p.Arguments) > 0 && string(p.Arguments) != "null" {
		if err := json.Unmarshal(p.Arguments, &args); err != nil || args == nil {
			return nil, errorAt(http.StatusOK, CodeInvalidParams, "tools/call arguments must be an object")
		}
	}
	start := time.Now()
	var res Result
	if err := t.InputSchema.Validate(args); err != nil {
		res = Errorf("invalid arguments for " + t.Name + ": " + err.Error())
	} else {
		raw, _ := json.Marshal(args)
		res = t.Call(ctx, raw)
	}
	if s.OnCall != nil {
		s.OnCall(ctx, t.Name, time.Since(start), res.IsError)
	}
	return res.wire(modern), nil
}
