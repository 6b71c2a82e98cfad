package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProcessNames(t *testing.T) {
	ts, s := newTestServer(t, testServer{})
	code, body := call(t, ts, "POST", "/start_process", map[string]any{"cmd": "echo one; sleep 100", "name": "web.dev_1"})
	require.Equal(t, http.StatusCreated, code)
	first := body["id"].(string)

	// Taken while it runs.
	code, body = call(t, ts, "POST", "/start_process", map[string]any{"cmd": "true", "name": "web.dev_1"})
	assert.Equal(t, http.StatusConflict, code)
	assert.Contains(t, body["error"], "web.dev_1")

	// Every endpoint that takes an id takes the name.
	code, st := call(t, ts, "GET", "/process_status?id=web.dev_1", nil)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, first, st["id"])
	_, next := stream(t, ts, "GET", "/process_logs_streaming?id=web.dev_1&follow=false", nil)
	evs := readAll(t, next)
	require.NotEmpty(t, evs)
	assert.Equal(t, "one", evs[0].Data["data"])
	_, list := call(t, ts, "GET", "/list_processes", nil)
	for _, item := range list["processes"].([]any) {
		assert.NotContains(t, item.(map[string]any), "name", "list_processes items keep exactly their keys")
	}
	code, _ = call(t, ts, "POST", "/kill_process", map[string]any{"id": "web.dev_1"})
	require.Equal(t, http.StatusOK, code)
	waitStatus(t, s, first)

	// Free once it has ended; the name then refers to the newest.
	code, body = call(t, ts, "POST", "/start_process", map[string]any{"cmd": "sleep 100", "name": "web.dev_1"})
	require.Equal(t, http.StatusCreated, code)
	second := body["id"].(string)
	_, st = call(t, ts, "GET", "/process_status?id=web.dev_1", nil)
	assert.Equal(t, second, st["id"])
	code, _ = call(t, ts, "POST", "/kill_process", map[string]any{"id": "web.dev_1"})
	require.Equal(t, http.StatusOK, code)

	for _, bad := range []string{strings.Repeat("x", 65), "a b", "ü"} {
		code, body = call(t, ts, "POST", "/start_process", map[string]any{"cmd": "true", "name": bad})
		assert.Equal(t, http.StatusBadRequest, code, bad)
		assert.Contains(t, body["error"], "process name", bad)
	}
	code, _ = call(t, ts, "POST", "/run", map[string]any{"cmd": "true", "name": "x"})
	assert.Equal(t, http.StatusBadRequest, code)
}

func TestProcessNameTakenWhileWaitingToRestart(t *testing.T) {
	ts, s := newTestServer(t, testServer{})
	code, body := call(t, ts, "POST", "/start_process", map[string]any{"cmd": "exit 1", "name": "crashy",
		"restart": map[string]any{"policy": "on-failure", "backoff_ms": 60000}})
	require.Equal(t, http.StatusCreated, code)
	id := body["id"].(string)
	require.Eventually(t, func() bool {
		p, err := s.procs.Get(id)
		return err == nil && p.Info().Restarts == 1
	}, 10*time.Second, 10*time.Millisecond)
	_, list := call(t, ts, "GET", "/list_processes", nil)
	assert.Equal(t, "running", list["processes"].([]any)[0].(map[string]any)["status"], "running while it waits to restart")
	code, _ = call(t, ts, "POST", "/start_process", map[string]any{"cmd": "true", "name": "crashy"})
	assert.Equal(t, http.StatusConflict, code)
	code, _ = call(t, ts, "POST", "/kill_process", map[string]any{"id": "crashy"})
	require.Equal(t, http.StatusOK, code)
	_, st := call(t, ts, "GET", "/process_status?id=crashy", nil)
	assert.Equal(t, "killed", st["status"])
}
