package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Shutdown deletes the sessions: what their commands left running dies,
// and their temp workdirs are removed.
func TestShutdownDeletesSessions(t *testing.T) {
	a := startAgent(t, map[string]string{"SANDBOX_SECRET": testSecret}, options{})
	code, body := a.do(t, http.MethodPost, "/create_session", testSecret, `{"id":"s","workdir":"temp"}`)
	require.Equal(t, http.StatusCreated, code, body)
	var created struct{ Cwd string }
	require.NoError(t, json.Unmarshal([]byte(body), &created))
	require.DirExists(t, created.Cwd)
	code, body = a.do(t, http.MethodPost, "/run", testSecret, `{"cmd":"sleep 100 >/dev/null 2>&1 & echo $!","session":"s"}`)
	require.Equal(t, http.StatusOK, code, body)
	var out struct{ Stdout string }
	require.NoError(t, json.Unmarshal([]byte(body), &out))
	pid, err := strconv.Atoi(strings.TrimSpace(out.Stdout))
	require.NoError(t, err)

	_, err = a.stop(t)
	assert.NoError(t, err)
	assertDies(t, pid, "what a session's command left outlived the agent")
	assert.NoDirExists(t, created.Cwd)
}
