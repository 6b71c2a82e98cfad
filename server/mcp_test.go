package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/mcp"
)

// mcpPost sends one raw JSON-RPC message to /mcp with headers (name: value)
// and returns the status, the headers and the decoded reply (nil if none).
func mcpPost(t *testing.T, ts *httptest.Server, msg string, headers ...string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+"/mcp", strings.NewReader(msg))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testSecret)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if len(bytes.TrimSpace(body)) == 0 {
		return resp.StatusCode, resp.Header, nil
	}
	var m map[string]any
	require.NoError(t, json.Unmarshal(body, &m), string(body))
	return resp.StatusCode, resp.Header, m
}

func rpcCode(m map[string]any) float64 {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

func result(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	r, ok := m["result"].(map[string]any)
	require.True(t, ok, "no result in %v", m)
	return r
}

const echoCall = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"preview_url","arguments":{"port":3000}}}`

// Each version as a raw client sends it: 2025-x with initialize, or
// without it; 2026-07-28 with server/discover and the _meta and headers.
func TestMCPVersions(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	for _, v := range []string{mcp.Version20250618, mcp.Version20251125} {
		code, h, m := mcpPost(t, ts, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+v+
			`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
		require.Equal(t, http.StatusOK, code)
		assert.Empty(t, h.Get("Mcp-Session-Id"), "a stateless server mints no session")
		assert.Equal(t, v, result(t, m)["protocolVersion"])
		code, _, _ = mcpPost(t, ts, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "MCP-Protocol-Version", v)
		assert.Equal(t, http.StatusAccepted, code)
		// A session id the client makes up is ignored.
		code, _, m = mcpPost(t, ts, echoCall, "MCP-Protocol-Version", v, "Mcp-Session-Id", "made-up")
		require.Equal(t, http.StatusOK, code)
		assert.Equal(t, map[string]any{"path": "/proxy/3000/"}, result(t, m)["structuredContent"])
		assert.NotContains(t, result(t, m), "resultType")
	}
	// No initialize at all.
	code, _, m := mcpPost(t, ts, echoCall)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, false, result(t, m)["isError"] == true)

	// 2026-07-28: no initialize; discover, then a call in that form.
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`
	code, _, m = mcpPost(t, ts, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta+`}}`,
		"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "server/discover")
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, []any{"2026-07-28", "2025-11-25", "2025-06-18"}, result(t, m)["supportedVersions"])
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"preview_url","arguments":{"port":3000},` + meta + `}}`
	code, _, m = mcpPost(t, ts, call, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "preview_url")
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "complete", result(t, m)["resultType"])
	// Headers that differ from the body.
	code, _, m = mcpPost(t, ts, call, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "read_file")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.EqualValues(t, mcp.CodeHeaderMismatch, rpcCode(m))
	// initialize is not part of 2026-07-28.
	code, _, m = mcpPost(t, ts, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{`+meta+`}}`,
		"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "initialize")
	assert.Equal(t, http.StatusOK, code)
	assert.EqualValues(t, mcp.CodeMethodNotFound, rpcCode(m))

	// An unsupported version, by header or by _meta: 400, -32022, listed.
	for _, msg := range []struct{ body, header string }{
		{echoCall, "2024-01-01"},
		{strings.Replace(call, "2026-07-28", "2030-01-01", 1), "2030-01-01"},
	} {
		code, _, m = mcpPost(t, ts, msg.body, "MCP-Protocol-Version", msg.header, "Mcp-Method", "tools/call", "Mcp-Name", "preview_url")
		require.Equal(t, http.StatusBadRequest, code)
		assert.EqualValues(t, mcp.CodeUnsupportedVersion, rpcCode(m))
		data := m["error"].(map[string]any)["data"].(map[string]any)
		assert.Equal(t, []any{"2026-07-28", "2025-11-25", "2025-06-18"}, data["supported"])
		assert.Equal(t, msg.header, data["requested"])
	}
}

// Protocol errors are JSON-RPC errors; a tool's failures are results.
func TestMCPErrors(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	for _, c := range []struct {
		name, msg string
		status    int
		code      float64
	}{
		{"unknown tool", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope"}}`, 200, mcp.CodeInvalidParams},
		{"no name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}`, 200, mcp.CodeInvalidParams},
		{"arguments not an object", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":[1]}}`, 200, mcp.CodeInvalidParams},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"resources/list"}`, 200, mcp.CodeMethodNotFound},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, 400, mcp.CodeInvalidRequest},
		{"not 2.0", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, 400, mcp.CodeInvalidRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, m := mcpPost(t, ts, c.msg)
			assert.Equal(t, c.status, code)
			assert.Equal(t, c.code, rpcCode(m))
		})
	}
	code, _, m := mcpPost(t, ts, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/no/such"}}}`)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, true, result(t, m)["isError"])
	code, _, m = mcpPost(t, ts, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/etc/hostname","bogus":1}}}`)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, true, result(t, m)["isError"], "an argument the schema does not name")
}

// 401 comes first, as for the API; then the origin; then GET and DELETE
// are 405 with Allow: POST. There is no OAuth metadata.
func TestMCPTransportRefusals(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	send := func(method, token, origin string) *http.Response {
		req, err := http.NewRequestWithContext(t.Context(), method, ts.URL+"/mcp", strings.NewReader(echoCall))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := ts.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		for _, token := range []string{"", "wrong"} {
			resp := send(method, token, "")
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, method)
			assert.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer", method)
		}
	}
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		resp := send(method, testSecret, "")
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
		assert.Equal(t, "POST", resp.Header.Get("Allow"))
	}
	assert.Equal(t, http.StatusForbidden, send(http.MethodPost, testSecret, "http://evil.example").StatusCode)
	assert.Equal(t, http.StatusForbidden, send(http.MethodGet, testSecret, "http://evil.example").StatusCode)
	assert.Equal(t, http.StatusOK, send(http.MethodPost, testSecret, ts.URL).StatusCode, "the agent's own origin")
	code, _ := call(t, ts, http.MethodGet, "/.well-known/oauth-protected-resource", nil)
	assert.Equal(t, http.StatusNotFound, code)
}

// An edge's origin is allowed by MCPConfig.Origins.
func TestMCPOrigins(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{MCP: MCPConfig{Origins: []string{"https://ide.example.com"}}}})
	code, _, _ := mcpPost(t, ts, echoCall, "Origin", "https://ide.example.com")
	assert.Equal(t, http.StatusOK, code)
	code, _, _ = mcpPost(t, ts, echoCall, "Origin", "https://other.example.com")
	assert.Equal(t, http.StatusForbidden, code)
}

// MCP.Off: /mcp is 404 like any unknown path.
func TestMCPOff(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{MCP: MCPConfig{Off: true}}})
	code, _ := call(t, ts, http.MethodPost, "/mcp", echoCall)
	assert.Equal(t, http.StatusNotFound, code)
}

// MCP.Tools offers only the tools it names; another is an unknown tool.
func TestMCPToolsLimit(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{MCP: MCPConfig{Tools: []string{"read_file", "list_dir"}}}})
	_, _, m := mcpPost(t, ts, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	var names []string
	for _, tool := range result(t, m)["tools"].([]any) {
		names = append(names, tool.(map[string]any)["name"].(string))
	}
	assert.Equal(t, []string{"read_file", "list_dir"}, names)
	_, _, m = mcpPost(t, ts, echoCall)
	assert.EqualValues(t, mcp.CodeInvalidParams, rpcCode(m))
	assert.NoError(t, CheckMCPTools([]string{"read_file"}))
	assert.ErrorContains(t, CheckMCPTools([]string{"read_file", "rm_rf"}), `"rm_rf"`)
}

// One log line per tool call, with its request id, tool, duration and
// outcome, and nothing of its arguments.
func TestMCPToolCallLog(t *testing.T) {
	var buf syncBuffer
	ts, _ := newTestServer(t, testServer{log: zerolog.New(&buf)})
	_, h, _ := mcpPost(t, ts, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"/no/dir/f","content":"SECRET-CONTENT"}}}`)
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if strings.Contains(l, `"tool"`) {
			require.Nil(t, line, "one line per call")
			require.NoError(t, json.Unmarshal([]byte(l), &line))
		}
	}
	require.NotNil(t, line, buf.String())
	assert.Equal(t, "write_file", line["tool"])
	assert.Equal(t, true, line["is_error"])
	assert.Contains(t, line, "duration_ms")
	assert.NotEmpty(t, line["request_id"])
	if id := h.Get("X-Request-Id"); id != "" {
		assert.Equal(t, id, line["request_id"])
	}
	assert.NotContains(t, buf.String(), "SECRET-CONTENT")
}

// The protocol server is built at the first /mcp request rather than at
// start-up: requests that race to be first all get the one server, whole.
func TestMCPFirstCallsAtOnce(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	const n = 8
	bodies := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+"/mcp",
				strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			if err != nil {
				return
			}
			req.Header.Set("Authorization", "Bearer "+testSecret)
			req.Header.Set("Content-Type", "application/json")
			resp, err := ts.Client().Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			bodies[i] = string(b)
		})
	}
	wg.Wait()
	_, _, m := mcpPost(t, ts, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	require.NotEmpty(t, result(t, m)["tools"])
	want, err := json.Marshal(m)
	require.NoError(t, err)
	for _, b := range bodies {
		assert.JSONEq(t, string(want), b)
	}
}
