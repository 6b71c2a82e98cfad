package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/client"
)

// End to end: -session-env-budget and -input-budget (here from
// their variables) bound what sessions' environments and commands' inputs
// hold. Past either, 503 names the budget and its size; a session that
// is deleted gives its bytes back, and the budget takes as much again; a
// session command whose state does not fit runs, but says that its state
// was not saved.
func TestBudgetsEndToEnd(t *testing.T) {
	a := startAgent(t, map[string]string{"SANDBOX_SECRET": testSecret, "SANDBOX_SESSION_ENV_BUDGET": "1MiB",
		"SANDBOX_INPUT_BUDGET": "2MiB"}, options{})
	post := func(path string, body map[string]any) (int, map[string]any) {
		t.Helper()
		b, err := json.Marshal(body)
		require.NoError(t, err)
		code, reply := a.do(t, http.MethodPost, path, testSecret, string(b))
		var out map[string]any
		require.NoError(t, json.Unmarshal([]byte(reply), &out), reply)
		return code, out
	}
	big := map[string]any{"BIG": strings.Repeat("x", 100<<10)}
	fill := func() int {
		t.Helper()
		for i := range 20 {
			code, body := post("/create_session", map[string]any{"id": "s" + strconv.Itoa(i), "env": big})
			if code == http.StatusServiceUnavailable {
				assert.Contains(t, body["error"], "session environment budget exhausted: sessions hold ")
				assert.Contains(t, body["error"], "past the session environment budget of 1048576 bytes")
				return i
			}
			require.Equal(t, http.StatusCreated, code, body)
		}
		t.Fatal("20 sessions of 100 KiB fit in a budget of 1 MiB")
		return 0
	}
	n := fill()
	require.Greater(t, n, 5)

	code, body := post("/run", map[string]any{"cmd": `export MORE="$BIG"; echo ran`, "session": "s0"})
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "ran\n", body["stdout"])
	assert.Contains(t, body["session_error"], "the session's state was not saved: session environment budget exhausted: ")
	code, body = post("/run", map[string]any{"cmd": `echo "${MORE:-none}"`, "session": "s0"})
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "none\n", body["stdout"])
	assert.NotContains(t, body, "session_error")
	res, err := a.newClient(t, testSecret).Run(t.Context(), client.Command{Cmd: `export MORE="$BIG"`, Session: "s0"})
	require.NoError(t, err)
	assert.Contains(t, res.SessionError, "the session's state was not saved: ", "the Go client shows it")
	code, stream := a.do(t, http.MethodPost, "/run_streaming", testSecret, `{"cmd":"export MORE=\"$BIG\"","session":"s0"}`)
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, stream, `"session_error":"the session's state was not saved: session environment budget exhausted: `)

	for i := range n {
		code, body := post("/delete_session", map[string]any{"id": "s" + strconv.Itoa(i)})
		require.Equal(t, http.StatusOK, code, body)
	}
	assert.Equal(t, n, fill(), "the deleted sessions gave their bytes back")

	input := strings.Repeat("y", 3<<19) // more than the stdin pipe holds
	code, body = post("/start_process", map[string]any{"cmd": "sleep 100", "input": input})
	require.Equal(t, http.StatusCreated, code, body)
	id := body["id"]
	code, body = post("/start_process", map[string]any{"cmd": "sleep 100", "input": input})
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body["error"], "the input budget of 2097152 bytes")
	code, body = post("/kill_process", map[string]any{"id": id})
	require.Equal(t, http.StatusOK, code, body)
	code, body = post("/start_process", map[string]any{"cmd": "sleep 100", "input": input})
	assert.Equal(t, http.StatusCreated, code, body)
}
