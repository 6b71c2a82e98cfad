package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// preview_url names the host-name form of an exposed port, built from the
// host the MCP request came by, and that URL reaches the app.
func TestMCPPreviewURLHostForm(t *testing.T) {
	app := startApp(t)
	p := strconv.Itoa(app.port)
	ts, s := newTestServer(t, testServer{cfg: Config{TrustForwardedHost: true}, runner: &executor.Runner{}})
	call := func(host string, h http.Header) map[string]any {
		t.Helper()
		msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"preview_url","arguments":{"port":` + p + `}}}`
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+"/mcp", strings.NewReader(msg))
		require.NoError(t, err)
		req.Host = host
		for k, v := range h {
			req.Header[k] = v
		}
		req.Header.Set("Authorization", "Bearer "+testSecret)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := ts.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		var m struct {
			Result struct {
				Structured map[string]any `json:"structuredContent"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal(body, &m), string(body))
		return m.Result.Structured
	}

	out := call("box.example.com", nil)
	assert.Equal(t, "/proxy/"+p+"/", out["path"])
	assert.NotContains(t, out, "url", "a port not exposed has no host form")

	s.exposed.expose(app.port, false)
	out = call("box.example.com:8443", nil)
	assert.Equal(t, "http://"+p+"-box.example.com:8443/", out["url"])
	assert.Equal(t, false, out["public"])
	out = call("127.0.0.1:9999", nil)
	assert.NotContains(t, out, "url", "no PORT- name reaches an IP address")
	out = call("localhost", nil)
	assert.NotContains(t, out, "url")

	s.exposed.expose(app.port, true)
	out = call(ts.Listener.Addr().String(), http.Header{"X-Forwarded-Host": {"agent.example.com"}, "X-Forwarded-Proto": {"https"}})
	assert.Equal(t, "https://"+p+"-agent.example.com/", out["url"])
	assert.Equal(t, true, out["public"])

	// The URL reaches the app by its host name, as the edge would send it.
	u, err := url.Parse(out["url"].(string))
	require.NoError(t, err)
	resp, body := hostGet(t, ts, ts.Listener.Addr().String(), "/x", http.Header{"X-Forwarded-Host": {u.Host}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "/x", decodeSeen(t, body).URI)
}
