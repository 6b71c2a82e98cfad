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

// exec keeps stdin open, as /run with yield_ms and "stdin": true: a
// command waiting at a prompt when the yield passes takes exec_poll's
// input, and exec_poll's close_stdin is its end of file.
func TestMCPExecStdin(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	cs := connectSDK(t, ts.URL, "")

	got := structured(t, callSDK(t, cs, "exec", map[string]any{"cmd": "printf 'name? '; read x; echo got $x", "yield_ms": 300}))
	require.Equal(t, "running", got["status"], "read waits for input rather than reading EOF")
	assert.Equal(t, "name? ", got["output"])
	id := got["process_id"].(string)
	res := callSDK(t, cs, "exec_poll", map[string]any{"process_id": id, "input": "hi\n", "yield_ms": 5000})
	require.False(t, res.IsError, textOf(res))
	got = structured(t, res)
	assert.Equal(t, "exited", got["status"])
	assert.Equal(t, "got hi\n", got["output"])

	got = structured(t, callSDK(t, cs, "exec", map[string]any{"cmd": "wc -l", "yield_ms": 300}))
	require.Equal(t, "running", got["status"])
	id = got["process_id"].(string)
	res = callSDK(t, cs, "exec_poll", map[string]any{"process_id": id, "input": "a\nb\n", "close_stdin": true, "yield_ms": 5000})
	got = structured(t, res)
	require.Equal(t, "exited", got["status"], textOf(res))
	assert.Equal(t, "2", strings.TrimSpace(got["output"].(string)))

	code, _ := call(t, ts, "POST", "/create_session", map[string]any{"id": "s"})
	require.Equal(t, 201, code)
	got = structured(t, callSDK(t, cs, "exec", map[string]any{"cmd": "read x; echo got $x", "session": "s", "yield_ms": 300}))
	require.Equal(t, "running", got["status"], "in a session too")
	got = structured(t, callSDK(t, cs, "exec_poll", map[string]any{"process_id": got["process_id"], "input": "there\n", "yield_ms": 5000}))
	assert.Equal(t, "got there\n", got["output"])

	// A command that ended has no stdin left to take input.
	got = structured(t, callSDK(t, cs, "exec", map[string]any{"cmd": "sleep 0.3; echo x", "yield_ms": 50}))
	id = got["process_id"].(string)
	require.Eventually(t, func() bool {
		return structured(t, callSDK(t, cs, "exec_poll", map[string]any{"process_id": id, "yield_ms": 1000}))["status"] == "exited"
	}, 5*time.Second, 10*time.Millisecond)
	res = callSDK(t, cs, "exec_poll", map[string]any{"process_id": id, "input": "late\n"})
	assert.True(t, res.IsError, textOf(res))
}
