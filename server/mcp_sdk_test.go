package server

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/mcp"
)

// bearerTransport adds the test secret to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// connectSDK connects the official Go SDK's client to ts's /mcp at version
// (the SDK's newest if "").
func connectSDK(t *testing.T, url, version string) *sdk.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-test", Version: "1"}, nil)
	tr := &sdk.StreamableClientTransport{Endpoint: url + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{testSecret}}, MaxRetries: -1}
	cs, err := c.Connect(ctx, tr, &sdk.ClientSessionOptions{ProtocolVersion: version})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func callSDK(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err)
	return res
}

func structured(t *testing.T, res *sdk.CallToolResult) map[string]any {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

func textOf(res *sdk.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*sdk.TextContent); ok {
		return tc.Text
	}
	return ""
}

// The official Go SDK's client, at each version it negotiates, lists the
// tools and drives the file and process tools against the real agent.
func TestMCPGoSDKClient(t *testing.T) {
	ts, s := newTestServer(t, testServer{})
	for _, version := range []string{"", mcp.Version20251125, mcp.Version20250618} {
		t.Run("version "+version, func(t *testing.T) {
			cs := connectSDK(t, ts.URL, version)
			want := version
			if want == "" {
				want = mcp.Version20260728
			}
			assert.Equal(t, want, cs.InitializeResult().ProtocolVersion)

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			list, err := cs.ListTools(ctx, nil)
			require.NoError(t, err)
			var names []string
			for _, tool := range list.Tools {
				names = append(names, tool.Name)
				schema := tool.InputSchema.(map[string]any)
				assert.Equal(t, "object", schema["type"], tool.Name)
				assert.Contains(t, schema, "properties", tool.Name)
				assert.Contains(t, schema, "required", tool.Name)
			}
			assert.Equal(t, mcpToolNames(), names)

			dir := t.TempDir()
			path := filepath.Join(dir, "a.txt")
			res := callSDK(t, cs, "write_file", map[string]any{"path": path, "content": "one\ntwo\nthree\nfour\n"})
			require.False(t, res.IsError, textOf(res))
			res = callSDK(t, cs, "read_file", map[string]any{"path": path, "offset": 2, "limit": 2})
			require.False(t, res.IsError, textOf(res))
			got := structured(t, res)
			assert.Equal(t, "two\nthree\n", got["content"])
			assert.EqualValues(t, 4, got["next_offset"])

			res = callSDK(t, cs, "read_file", map[string]any{"path": filepath.Join(dir, "missing")})
			assert.True(t, res.IsError)
			assert.Contains(t, textOf(res), "no such file")

			res = callSDK(t, cs, "list_dir", map[string]any{"path": dir})
			require.False(t, res.IsError, textOf(res))
			assert.Contains(t, textOf(res), "a.txt (19 bytes)")

			p, err := s.procs.Start(executor.Command{Cmd: "echo started; sleep 30"})
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				return structured(t, callSDK(t, cs, "process_logs", map[string]any{"process_id": p.ID}))["output"] == "started\n"
			}, 5*time.Second, 20*time.Millisecond)
			res = callSDK(t, cs, "process_list", nil)
			assert.Contains(t, textOf(res), p.ID)
			res = callSDK(t, cs, "process_kill", map[string]any{"process_id": p.ID})
			require.False(t, res.IsError, textOf(res))
			select {
			case <-p.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("process_kill left the process running")
			}

			res = callSDK(t, cs, "preview_url", map[string]any{"port": 8000})
			assert.Equal(t, "/proxy/8000/", structured(t, res)["path"])

			// Arguments that fail the schema are a result the model reads.
			res = callSDK(t, cs, "read_file", map[string]any{"path": 3})
			assert.True(t, res.IsError)
			assert.Contains(t, textOf(res), `argument "path": must be a string`)

			_, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "no_such_tool"})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "unknown tool")
		})
	}
}
