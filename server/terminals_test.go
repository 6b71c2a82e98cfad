package server

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/terminals"
)

func TestTerminalEcho(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	id := startTerminal(t, ts, map[string]any{"env": map[string]string{"PS1": "$ "}})
	w := dialTerminal(t, ts, id, "", nil)
	w.send("echo $((6*7))\n")
	w.waitFor("42\r\n")
	assert.Equal(t, uint64(0), *w.attached, "from the first byte")

	items := listTerminals(t, ts)
	require.Len(t, items, 1)
	assert.Equal(t, id, items[0]["id"])
	assert.Equal(t, "running", items[0]["status"])
	assert.Equal(t, 80.0, items[0]["cols"])
	assert.Equal(t, 24.0, items[0]["rows"])
	assert.Equal(t, 1.0, items[0]["clients"])
	assert.NotContains(t, items[0], "exit_code")

	w.send("exit 3\n")
	w.toEnd()
	assert.Equal(t, 3, *w.exit)
	require.Eventually(t, func() bool { return listTerminals(t, ts)[0]["clients"] == 0.0 }, 5*time.Second, 10*time.Millisecond)
	items = listTerminals(t, ts)
	assert.Equal(t, "failed", items[0]["status"])
	assert.Equal(t, 3.0, items[0]["exit_code"])
}

func TestTerminalResize(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	id := startTerminal(t, ts, map[string]any{"cmd": "stty size; read x; stty size; read x; stty size", "cols": 100, "rows": 30})
	w := dialTerminal(t, ts, id, "", nil)
	w.waitFor("30 100\r\n")
	w.control(map[string]any{"type": "resize", "cols": 132, "rows": 43})
	require.Eventually(t, func() bool { return listTerminals(t, ts)[0]["cols"] == 132.0 }, 5*time.Second, 10*time.Millisecond)
	w.send("\n")
	w.waitFor("43 132\r\n")

	code, out := call(t, ts, http.MethodPost, "/resize_terminal", map[string]any{"id": id, "cols": 50, "rows": 10})
	require.Equal(t, http.StatusOK, code, "%v", out)
	assert.Equal(t, true, out["success"])
	w.send("\n")
	w.waitFor("10 50\r\n")
	w.toEnd()
	code, out = call(t, ts, http.MethodPost, "/resize_terminal", map[string]any{"id": id, "cols": 50, "rows": 10})
	assert.Equal(t, http.StatusConflict, code, "%v", out)
	assert.Equal(t, "terminal is not running (status: completed)", out["error"])

	for _, body := range []map[string]any{
		{"id": id, "cols": 0, "rows": 10}, {"id": id, "cols": 10, "rows": 1001}, {"id": id, "cols": 10}, {"cols": 10, "rows": 10},
	} {
		code, out = call(t, ts, http.MethodPost, "/resize_terminal", body)
		assert.Equal(t, http.StatusBadRequest, code, "%v: %v", body, out)
	}
	code, _ = call(t, ts, http.MethodPost, "/resize_terminal", map[string]any{"id": "nope", "cols": 10, "rows": 10})
	assert.Equal(t, http.StatusNotFound, code)
}

func TestTerminalKill(t *testing.T) {
	ts, s := newTestServer(t, testServer{})
	id := startTerminal(t, ts, map[string]any{"cmd": "sleep 100 & sleep 100"})
	w := dialTerminal(t, ts, id, "", nil)
	term, err := s.terms.Get(id)
	require.NoError(t, err)

	code, out := call(t, ts, http.MethodPost, "/kill_terminal", map[string]any{"id": id})
	require.Equal(t, http.StatusOK, code, "%v", out)
	assert.Equal(t, "Terminal killed", out["message"])
	w.toEnd()
	assert.Equal(t, 137, *w.exit)
	items := listTerminals(t, ts)
	assert.Equal(t, "killed", items[0]["status"], "the reply comes once it has ended")
	assert.Empty(t, sessionPids(t, term.PID))

	code, out = call(t, ts, http.MethodPost, "/kill_terminal", map[string]any{"id": id})
	assert.Equal(t, http.StatusConflict, code)
	assert.Equal(t, "terminal is not running (status: killed)", out["error"])
	code, _ = call(t, ts, http.MethodPost, "/kill_terminal", map[string]any{"id": "nope"})
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = call(t, ts, http.MethodPost, "/kill_terminal", map[string]any{"id": id, "signal": "SIGNOPE"})
	assert.Equal(t, http.StatusBadRequest, code)
	code, _ = call(t, ts, http.MethodPost, "/kill_terminal", map[string]any{})
	assert.Equal(t, http.StatusBadRequest, code)
}

func TestTerminalStartErrors(t *testing.T) {
	ts, _ := newTestServer(t, testServer{terms: terminals.Options{MaxRunning: 1}})
	for _, body := range []map[string]any{
		{"cols": 0}, {"rows": 1001}, {"cols": "80"}, {"cwd": "/no/such/dir"}, {"cmd": "a\x00b"},
	} {
		code, out := call(t, ts, http.MethodPost, "/start_terminal", body)
		assert.Equal(t, http.StatusBadRequest, code, "%v: %v", body, out)
	}
	startTerminal(t, ts, map[string]any{"cmd": "sleep 100"})
	code, out := call(t, ts, http.MethodPost, "/start_terminal", nil)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "too many running terminals (limit 1)", out["error"])
}
