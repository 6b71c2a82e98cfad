package server

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exec and exec_poll over the agent's own /run yield_ms and
// /poll_process: the Go SDK's client checks every structuredContent
// against the declared outputSchema.
func TestMCPExecTools(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	cs := connectSDK(t, ts.URL, "")

	res := callSDK(t, cs, "exec", map[string]any{"cmd": "echo hi"})
	require.False(t, res.IsError, textOf(res))
	got := structured(t, res)
	assert.Equal(t, "exited", got["status"])
	assert.EqualValues(t, 0, got["exit_code"])
	assert.Equal(t, "hi\n", got["output"])

	res = callSDK(t, cs, "exec", map[string]any{"cmd": "echo out; exit 3"})
	assert.True(t, res.IsError, "a non-zero exit is an error result")
	assert.EqualValues(t, 3, structured(t, res)["exit_code"])

	res = callSDK(t, cs, "exec", map[string]any{"cmd": "sleep 1; echo done", "yield_ms": 50})
	got = structured(t, res)
	require.Equal(t, "running", got["status"], textOf(res))
	id := got["process_id"].(string)
	require.Eventually(t, func() bool {
		got = structured(t, callSDK(t, cs, "exec_poll", map[string]any{"process_id": id, "cursor": 0, "yield_ms": 500}))
		return got["status"] == "exited"
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, "done\n", got["output"])

	res = callSDK(t, cs, "exec", map[string]any{"cmd": "seq 1 5000", "max_output_bytes": 1000})
	got = structured(t, res)
	assert.Equal(t, true, got["truncated"])
	assert.LessOrEqual(t, len(got["output"].(string)), 1001)
	assert.True(t, strings.HasPrefix(got["output"].(string), "1\n2\n"))
	assert.True(t, strings.HasSuffix(got["output"].(string), "4999\n5000\n"))
	id = got["process_id"].(string)
	assert.Regexp(t, `\[output truncated: \d+ bytes omitted; read it with process_logs \{"process_id": "`+id+`"\}\]$`, textOf(res))
	logs := structured(t, callSDK(t, cs, "process_logs", map[string]any{"process_id": id, "max_output_bytes": 1 << 20}))
	var all strings.Builder
	for i := 1; i <= 5000; i++ {
		all.WriteString(strconv.Itoa(i) + "\n")
	}
	assert.Equal(t, all.String(), logs["output"], "the whole output is readable by process_logs")
}

// exec and exec_poll are /run's yield_ms and /poll_process: the handle is
// a process /poll_process reads too, a cursor is a byte offset, stderr
// comes in its place among stdout (as read: two pipes are ordered only
// in time), a command that ended with its whole
// output is not left listed, and an unknown id is an error result.
func TestMCPExecIsRunYield(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	cs := connectSDK(t, ts.URL, "")

	got := structured(t, callSDK(t, cs, "exec", map[string]any{"cmd": "echo a; sleep 0.2; echo b >&2; sleep 0.2; echo c"}))
	assert.Equal(t, "a\nb\nc\n", got["output"])
	_, list := call(t, ts, "GET", "/list_processes", nil)
	assert.Empty(t, list["processes"], "an exec that ended within yield_ms is nobody's background process")

	got = structured(t, callSDK(t, cs, "exec", map[string]any{"cmd": "printf 'name? '; sleep 1; echo done", "yield_ms": 300}))
	require.Equal(t, "running", got["status"])
	assert.Equal(t, "name? ", got["output"], "a prompt without a newline is returned")
	assert.EqualValues(t, 6, got["cursor"])
	id := got["process_id"].(string)
	code, body := call(t, ts, "POST", "/poll_process", map[string]any{"id": id, "cursor": 0, "yield_ms": 5000})
	require.Equal(t, 200, code, body)
	assert.Equal(t, "name? done\n", body["stdout"])
	got = structured(t, callSDK(t, cs, "exec_poll", map[string]any{"process_id": id, "cursor": 6}))
	assert.Equal(t, "exited", got["status"])
	assert.Equal(t, "done\n", got["output"])
	assert.EqualValues(t, 0, got["exit_code"])

	res := callSDK(t, cs, "exec_poll", map[string]any{"process_id": "no-such-process"})
	assert.True(t, res.IsError)
	assert.Contains(t, textOf(res), "no-such-process")
}
