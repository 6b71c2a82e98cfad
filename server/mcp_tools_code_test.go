package server

import (
	"encoding/base64"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/contexts"
)

// run_code is a /run_code call read to its end: output, the last
// expression's value, an error as an error result, each PNG an MCP image;
// in a context, state lasts between calls; a timeout interrupts.
func TestMCPRunCode(t *testing.T) {
	ts := newContextServer(t, contexts.Options{})
	cs := connectSDK(t, ts.URL, "")

	res := callSDK(t, cs, "run_code", map[string]any{"code": "print('hi')\n1+1"})
	require.False(t, res.IsError, textOf(res))
	assert.Equal(t, "hi\n2\n[ok]", textOf(res))
	got := structured(t, res)
	assert.Equal(t, "ok", got["status"])
	assert.Equal(t, "hi\n", got["output"])
	assert.Equal(t, "2", got["result"])

	res = callSDK(t, cs, "run_code", map[string]any{"code": "print('before')\n1/0"})
	require.True(t, res.IsError)
	assert.Contains(t, textOf(res), "before\n")
	assert.Contains(t, textOf(res), "ZeroDivisionError: division by zero")
	assert.Equal(t, "ZeroDivisionError", structured(t, res)["error"].(map[string]any)["name"])

	png := []byte("\x89PNG\r\n\x1a\nfake")
	res = callSDK(t, cs, "run_code", map[string]any{"code": "class P:\n    def _repr_png_(self): return " +
		pyBytes(png) + "\ndisplay(P())\nprint('shown')"})
	require.False(t, res.IsError, textOf(res))
	require.Len(t, res.Content, 2, "text, then the image")
	img, ok := res.Content[1].(*sdk.ImageContent)
	require.True(t, ok, "%T", res.Content[1])
	assert.Equal(t, "image/png", img.MIMEType)
	assert.Equal(t, png, img.Data)
	assert.EqualValues(t, 1, structured(t, res)["images"])

	id := createContext(t, ts, map[string]any{"language": "python"})
	res = callSDK(t, cs, "run_code", map[string]any{"context": id, "code": "x = 41"})
	require.False(t, res.IsError, textOf(res))
	res = callSDK(t, cs, "run_code", map[string]any{"context": id, "code": "x + 1"})
	assert.Equal(t, "42", structured(t, res)["result"])
	assert.EqualValues(t, 2, structured(t, res)["execution_count"])

	start := time.Now()
	res = callSDK(t, cs, "run_code", map[string]any{"context": id, "code": "import time\ntime.sleep(30)", "timeout": 1})
	assert.Less(t, time.Since(start), 10*time.Second)
	require.True(t, res.IsError)
	assert.Equal(t, "timeout", structured(t, res)["status"])
	res = callSDK(t, cs, "run_code", map[string]any{"context": id, "code": "x"})
	assert.Equal(t, "41", structured(t, res)["result"], "an interrupt keeps the state")

	res = callSDK(t, cs, "run_code", map[string]any{"code": "print('x' * 5000)", "max_output_bytes": 1000})
	got = structured(t, res)
	assert.Equal(t, true, got["truncated"])
	assert.LessOrEqual(t, len(got["output"].(string)), 1001)
	assert.Contains(t, textOf(res), "[output truncated: 4001 bytes omitted;")

	res = callSDK(t, cs, "run_code", map[string]any{"context": "no-such-context", "code": "1"})
	assert.True(t, res.IsError)
	assert.Contains(t, textOf(res), "no such context")
}

func pyBytes(b []byte) string {
	return "__import__('base64').b64decode('" + base64.StdEncoding.EncodeToString(b) + "')"
}

// wait_for_port is /wait_for_port: ready as soon as something listens;
// not ready (a timeout, the process exited) is an error result saying why.
func TestMCPWaitForPort(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	cs := connectSDK(t, ts.URL, "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	res := callSDK(t, cs, "wait_for_port", map[string]any{"port": port, "timeout": 5})
	require.False(t, res.IsError, textOf(res))
	assert.Contains(t, textOf(res), "port "+strconv.Itoa(port)+" is ready")
	assert.Equal(t, true, structured(t, res)["ready"])
	require.NoError(t, ln.Close())

	res = callSDK(t, cs, "wait_for_port", map[string]any{"port": port, "timeout": 0.3})
	require.True(t, res.IsError)
	assert.True(t, strings.HasPrefix(textOf(res), "not ready: timeout"), textOf(res))
	assert.Equal(t, "timeout", structured(t, res)["reason"])

	code, body := call(t, ts, http.MethodPost, "/start_process", map[string]any{"cmd": "sleep 0.2; exit 4"})
	require.Equal(t, http.StatusCreated, code, body)
	res = callSDK(t, cs, "wait_for_port", map[string]any{"port": port, "timeout": 10, "process_id": body["id"]})
	require.True(t, res.IsError)
	assert.Contains(t, textOf(res), "not ready: process_exited (exit code 4;")

	res = callSDK(t, cs, "wait_for_port", map[string]any{"timeout": 1})
	require.True(t, res.IsError)
	assert.Contains(t, textOf(res), "port is required")
}
