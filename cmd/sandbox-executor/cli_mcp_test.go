package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// replies decodes the forwarder's stdout, one JSON-RPC message a line,
// by id: nothing else may be on it.
func replies(t *testing.T, stdout string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), "stdout carries only MCP messages: %q", line)
		require.Equal(t, "2.0", m["jsonrpc"])
		id, _ := json.Marshal(m["id"])
		out[string(id)] = m
	}
	return out
}

// sandbox-executor mcp forwards each stdin line to /mcp and writes each
// reply on its own line; a notification gets none; EOF ends it with 0.
func TestCLIMCP(t *testing.T) {
	a := startCLIAgent(t)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"three","method":"tools/call","params":{"name":"preview_url","arguments":{"port":5173}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"preview_url","arguments":{"port":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
	}, "\n") + "\n"
	for _, url := range []string{a.url, a.url + "/mcp"} {
		res := runCLI(t, nil, []byte(in), "mcp", "-url", url, "-token", testSecret)
		require.Equal(t, 0, res.code, res.stderr)
		got := replies(t, res.stdout)
		require.Len(t, got, 4, res.stdout)
		assert.Equal(t, "2025-06-18", got["1"]["result"].(map[string]any)["protocolVersion"])
		assert.NotEmpty(t, got["2"]["result"].(map[string]any)["tools"])
		assert.Equal(t, map[string]any{"path": "/proxy/5173/"}, got[`"three"`]["result"].(map[string]any)["structuredContent"])
		assert.Equal(t, "complete", got["4"]["result"].(map[string]any)["resultType"], "the 2026-07-28 headers were set")
	}
}

// A refused token is a JSON-RPC error on that request that names 401.
func TestCLIMCPUnauthorized(t *testing.T) {
	a := startCLIAgent(t)
	res := runCLI(t, map[string]string{"SANDBOX_SECRET": "wrong"}, []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`+"\n"),
		"mcp", "-url", a.url)
	require.Equal(t, 0, res.code, res.stderr)
	got := replies(t, res.stdout)
	require.Contains(t, got, "7")
	assert.Contains(t, got["7"]["error"].(map[string]any)["message"], "401")
}

// SIGTERM (ctx) ends the forwarder even while stdin stays open and silent.
func TestCLIMCPInterrupted(t *testing.T) {
	a := startCLIAgent(t)
	pr, pw := io.Pipe()
	defer pw.Close() // ends the stdin reader, which no cancel can reach
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		o := options{stdin: pr, stdout: io.Discard}
		done <- o.run(ctx, []string{"mcp", "-url", a.url}, getenv(a.env), io.Discard)
	}()
	cancel()
	select {
	case err := <-done:
		assert.Equal(t, exitCodeError{exitInterrupted}, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the forwarder did not end when its context did")
	}
}
