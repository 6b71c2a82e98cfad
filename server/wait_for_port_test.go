package server

import (
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// freeLoopbackPort returns a port nothing listens on now.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}

// slowServer is a Python HTTP server that sleeps delay seconds before it
// binds port on host.
func slowServer(host string, port int, delay string) string {
	return "exec /usr/bin/python3 -c 'import time, http.server; time.sleep(" + delay + "); " +
		"http.server.HTTPServer((\"" + host + "\", " + strconv.Itoa(port) + "), http.server.SimpleHTTPRequestHandler).serve_forever()'"
}

func TestWaitForListeningPort(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	code, body := call(t, ts, "POST", "/wait_for_port", map[string]any{"port": port})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, true, body["ready"])
	assert.Equal(t, float64(port), body["port"])
	assert.Equal(t, "127.0.0.1", body["address"])
	assert.Contains(t, body, "waited_ms")
}

func TestWaitForPortTimeout(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	port := freeLoopbackPort(t)
	start := time.Now()
	code, body := call(t, ts, "POST", "/wait_for_port", map[string]any{"port": port, "timeout": 0.3})
	require.Equal(t, http.StatusOK, code)
	assert.Less(t, time.Since(start), 3*time.Second)
	assert.Equal(t, false, body["ready"])
	assert.Equal(t, "timeout", body["reason"])
	assert.Contains(t, body["last_error"], "refused")
}

func TestWaitForPortProcessExits(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	port := freeLoopbackPort(t)
	code, body := call(t, ts, "POST", "/start_process", map[string]any{"cmd": "sleep 0.3; exit 3"})
	require.Equal(t, http.StatusCreated, code)
	start := time.Now()
	code, body = call(t, ts, "POST", "/wait_for_port", map[string]any{"port": port, "process_id": body["id"], "timeout": 20})
	require.Equal(t, http.StatusOK, code)
	assert.Less(t, time.Since(start), 3*time.Second, "at once, not at the timeout")
	assert.Equal(t, map[string]any{"ready": false, "reason": "process_exited", "exit_code": 3.0}, body)
}

func TestStartProcessReady(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	port := freeLoopbackPort(t)
	code, body := call(t, ts, "POST", "/start_process", map[string]any{"cmd": slowServer("127.0.0.1", port, "1"),
		"ready": map[string]any{"port": port, "mode": "http", "path": "/"}})
	require.Equal(t, http.StatusCreated, code)
	assert.Len(t, body, 3, "the reply comes at once, as it always did")
	id := body["id"].(string)
	_, st := call(t, ts, "GET", "/process_status?id="+id, nil)
	assert.Equal(t, false, st["ready"])

	// No port: the process's own probe.
	code, body = call(t, ts, "POST", "/wait_for_port", map[string]any{"process_id": id, "timeout": 20})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, true, body["ready"])
	assert.Equal(t, float64(port), body["port"])
	assert.Equal(t, "127.0.0.1", body["address"])
	_, st = call(t, ts, "GET", "/process_status?id="+id, nil)
	assert.Equal(t, true, st["ready"])
	code, _ = call(t, ts, "POST", "/kill_process", map[string]any{"id": id})
	require.Equal(t, http.StatusOK, code)
}

func TestStartProcessReadyExitsFirst(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	port := freeLoopbackPort(t)
	code, body := call(t, ts, "POST", "/start_process", map[string]any{"cmd": "sleep 0.3; exit 4", "ready": map[string]any{"port": port}})
	require.Equal(t, http.StatusCreated, code)
	start := time.Now()
	code, body = call(t, ts, "POST", "/wait_for_port", map[string]any{"process_id": body["id"]})
	require.Equal(t, http.StatusOK, code)
	assert.Less(t, time.Since(start), 3*time.Second)
	assert.Equal(t, map[string]any{"ready": false, "reason": "process_exited", "exit_code": 4.0}, body)
}

func TestWaitForPortBoundElsewhere(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	require.NoError(t, err)
	defer ln.Close()
	code, body := call(t, ts, "POST", "/wait_for_port", map[string]any{"port": ln.Addr().(*net.TCPAddr).Port, "timeout": 0.5})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, false, body["ready"])
	assert.Equal(t, "timeout", body["reason"])
	assert.Contains(t, body["last_error"], "listening only on 127.0.0.2")
}

func TestWaitForPortValidation(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	for _, tc := range []struct {
		body any
		code int
		want string
	}{
		{map[string]any{}, 400, "port is required"},
		{map[string]any{"port": 0}, 400, "port must be between 1 and 65535"},
		{map[string]any{"port": 80, "mode": "udp"}, 400, `mode must be "tcp" or "http"`},
		{map[string]any{"port": 80, "status": "500-200"}, 400, "status must be"},
		{map[string]any{"port": 80, "path": "x"}, 400, `path must start with "/"`},
		{map[string]any{"port": 80, "timeout": -1}, 400, "timeout must be"},
		{map[string]any{"port": 80, "process_id": "nope"}, 404, "process not found: nope"},
	} {
		code, body := call(t, ts, "POST", "/wait_for_port", tc.body)
		assert.Equal(t, tc.code, code, "%v", tc.body)
		assert.Contains(t, body["error"], tc.want)
	}
	code, body := call(t, ts, "POST", "/run", map[string]any{"cmd": "true", "ready": map[string]any{"port": 80}})
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body["error"], "ready is for /start_process only")
	code, body = call(t, ts, "POST", "/start_process", map[string]any{"cmd": "true", "ready": map[string]any{"mode": "http"}})
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, "ready: port is required", body["error"])
}

func TestStartProcessRestart(t *testing.T) {
	ts, s := newTestServer(t, testServer{})
	code, body := call(t, ts, "POST", "/start_process", map[string]any{"cmd": "echo run; exit 1",
		"restart": map[string]any{"policy": "on-failure", "max_restarts": 2, "backoff_ms": 50}})
	require.Equal(t, http.StatusCreated, code)
	assert.Len(t, body, 3)
	id := body["id"].(string)
	waitStatus(t, s, id)
	_, st := call(t, ts, "GET", "/process_status?id="+id, nil)
	assert.Equal(t, map[string]any{"id": id, "status": "failed", "exit_code": 1.0, "restarts": 2.0,
		"termination": map[string]any{"reason": "exit"}}, st)

	_, next := stream(t, ts, "GET", "/process_logs_streaming?id="+id, nil)
	evs := readAll(t, next)
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Name+" "+ev.ID+" "+ev.Raw)
	}
	require.Len(t, got, 6)
	assert.Contains(t, got[0], "log 1 ")
	assert.Equal(t, `restart  {"restart":1,"exit_code":1,"termination":{"reason":"exit"},"delay_ms":50}`, got[1])
	assert.Contains(t, got[2], "log 2 ")
	assert.Equal(t, `restart  {"restart":2,"exit_code":1,"termination":{"reason":"exit"},"delay_ms":100}`, got[3])
	assert.Contains(t, got[4], "log 3 ")
	assert.Contains(t, got[5], "complete")

	for _, bad := range []map[string]any{{"policy": "sometimes"}, {"policy": "always", "backoff_ms": 1}, {"policy": "always", "max_restarts": -2}} {
		code, body = call(t, ts, "POST", "/start_process", map[string]any{"cmd": "true", "restart": bad})
		assert.Equal(t, http.StatusBadRequest, code)
		assert.Contains(t, body["error"], "restart")
	}
	code, _ = call(t, ts, "POST", "/run", map[string]any{"cmd": "true", "restart": map[string]any{"policy": "always"}})
	assert.Equal(t, http.StatusBadRequest, code)
}
