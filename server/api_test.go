package server

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

func TestHealthIsOpenAndJSON(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{ProxyPort: 3031, Version: "v1"}, runner: &executor.Runner{}})
	resp, err := http.Get(ts.URL + "/health")
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	assert.Equal(t, "ok", body["status"])
	assert.Equal(t, "v1", body["version"])
	assert.Equal(t, "3031", body["proxy_port"])
	assert.IsType(t, float64(0), body["uptime"])
}

// HEAD /health, as load balancers send it, answers as GET does without
// the body.
func TestHealthHead(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{ProxyPort: 3031, Version: "v1"}, runner: &executor.Runner{}})
	resp, err := http.Head(ts.URL + "/health")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.Positive(t, resp.ContentLength, "Content-Length, as GET would send")
	assert.Empty(t, body)
}

func TestAuthRequiredEverywhereButHealth(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	paths := []struct{ method, path string }{
		{"POST", "/run"}, {"POST", "/run_streaming"}, {"POST", "/write_file"}, {"POST", "/read_file"},
		{"POST", "/delete_file"}, {"POST", "/make_dir"}, {"POST", "/delete_dir"}, {"POST", "/list_dir"},
		{"POST", "/bind_port"}, {"POST", "/unbind_port"}, {"POST", "/start_process"}, {"GET", "/list_processes"},
		{"POST", "/kill_process"}, {"GET", "/process_logs_streaming?id=x"}, {"POST", "/stat_file"}, {"GET", "/port_status"},
		{"GET", "/no_such_path"},
	}
	for _, p := range paths {
		for _, header := range []string{"", "Bearer wrong", "Basic " + testSecret, "Bearer"} {
			req, err := http.NewRequest(p.method, ts.URL+p.path, strings.NewReader(`{"cmd":"touch /tmp/should-not-run"}`))
			require.NoError(t, err)
			if header != "" {
				req.Header.Set("Authorization", header)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			var body map[string]any
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
			resp.Body.Close()
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s %s %q", p.method, p.path, header)
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			assert.Equal(t, `Bearer realm="sandbox-executor"`, resp.Header.Get("WWW-Authenticate"))
			assert.Contains(t, body["error"], "unauthorized")
		}
	}
}

// Two Authorization headers are ambiguous: proxies and servers differ on
// which one counts, so neither does.
func TestTwoAuthorizationHeadersAre400(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	for _, second := range []string{"Bearer " + testSecret, "Bearer wrong"} {
		req, err := http.NewRequest("GET", ts.URL+"/list_processes", nil)
		require.NoError(t, err)
		req.Header.Add("Authorization", "Bearer "+testSecret)
		req.Header.Add("Authorization", second)
		resp, err := ts.Client().Do(req)
		require.NoError(t, err)
		var body map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
		assert.Equal(t, "more than one Authorization header", body["error"])
	}
}

func TestRoutingKeyIgnoredAndSchemeCaseInsensitive(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	req, err := http.NewRequest("GET", ts.URL+"/list_processes", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "bearer "+testSecret)
	req.Header.Set("X-Routing-Key", "some-key")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestNotFoundAndMethodNotAllowedAreJSON(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	code, body := call(t, ts, "GET", "/nope", nil)
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body["error"], "/nope")

	for _, c := range []struct{ method, path string }{{"GET", "/run"}, {"POST", "/list_processes"}, {"DELETE", "/write_file"}, {"PUT", "/health"}} {
		code, body = call(t, ts, c.method, c.path, nil)
		assert.Equal(t, http.StatusMethodNotAllowed, code, c)
		assert.Contains(t, body["error"], "not allowed")
	}
}

func TestBadRequests(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	tests := []struct {
		path, body, want string
	}{
		{"/run", `{}`, "cmd is required"},
		{"/run", ``, "cmd is required"},
		{"/run", `{"cmd": 5}`, `field "cmd" must be a string`},
		{"/run", `{"cmd": "true", "env": ["A=1"]}`, `field "env" must be an object`},
		{"/run", `{"cmd": "true", "timeout": -1}`, "timeout"},
		{"/run", `{"cmd": `, "invalid request"},
		{"/run", `[1,2]`, "body must be a JSON object"},
		{"/run_streaming", `{"cmd": ""}`, "cmd is required"},
		{"/start_process", `{"cwd": "/tmp"}`, "cmd is required"},
		{"/kill_process", `{}`, "id is required"},
		{"/kill_process", `{"id": "x", "signal": "SIGNOPE"}`, "unknown signal"},
		{"/bind_port", `{}`, "port is required"},
		{"/bind_port", `{"port": "abc"}`, "between 1 and 65535"},
		{"/bind_port", `{"port": "0"}`, "between 1 and 65535"},
		{"/bind_port", `{"port": 70000}`, "between 1 and 65535"},
		{"/bind_port", `{"port": true}`, `field "port" must be a string or a number`},
		{"/kill_process", `{"id": "x", "signal": [15]}`, `field "signal" must be a string or a number`},
		{"/run", `{"cmd":"true"}{"cmd":"false"}`, "unexpected data after the JSON object"},
		{"/run", `{"cmd":"true"} x`, "unexpected data after the JSON object"},
		{"/run", `{"cmd":"true"}}`, "unexpected data after the JSON object"},
		{"/bind_port", `{"port": 8080} 1`, "unexpected data after the JSON object"},
	}
	for _, tt := range tests {
		code, body := call(t, ts, "POST", tt.path, tt.body)
		assert.Equal(t, http.StatusBadRequest, code, "%s %s", tt.path, tt.body)
		assert.Contains(t, body["error"], tt.want, "%s %s", tt.path, tt.body)
	}
}

// Input no process can be given is the request's fault: 400, which
// clients do not retry, and the same for every command endpoint.
func TestInvalidCommandsAre400(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	for _, path := range []string{"/run", "/run_streaming", "/start_process"} {
		for _, body := range []map[string]any{
			{"cmd": "echo a\x00b"},
			{"cmd": "true", "env": map[string]string{"A=B": "1"}},
		} {
			code, reply := call(t, ts, "POST", path, body)
			assert.Equal(t, http.StatusBadRequest, code, "%s %v", path, body)
			assert.Contains(t, reply["error"], "invalid command", "%s %v", path, body)
		}
	}
}

// A command that cannot start for the system's reasons is a 500 that says
// so, without the details, which go to the log.
func TestRunStartFailureIs500(t *testing.T) {
	ts, _ := newTestServer(t, testServer{runner: &executor.Runner{Shell: "/no/such/shell"}})
	code, body := call(t, ts, "POST", "/run", map[string]string{"cmd": "true"})
	assert.Equal(t, http.StatusInternalServerError, code)
	assert.Equal(t, map[string]any{"error": "failed to start command"}, body)
	code, body = call(t, ts, "POST", "/start_process", map[string]string{"cmd": "true"})
	assert.Equal(t, http.StatusInternalServerError, code)
	assert.Contains(t, body["error"], "Failed to start process: ")
}

func TestBodyTooLargeIs413(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{MaxBody: 1024}, runner: &executor.Runner{}})
	code, body := call(t, ts, "POST", "/write_file", map[string]string{"path": "/tmp/x", "content": strings.Repeat("x", 4096)})
	assert.Equal(t, http.StatusRequestEntityTooLarge, code)
	assert.Contains(t, body["error"], "too large")
}

func TestBadCwdIs400NamingIt(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	for _, path := range []string{"/run", "/run_streaming", "/start_process"} {
		resp := request(t, ts, "POST", path, map[string]string{"cmd": "true", "cwd": "/no/such/dir"})
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, path)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"), path)
		var body map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		assert.Contains(t, body["error"], "/no/such/dir", path)
	}
}

// White space after the object is no trailing data.
func TestWhiteSpaceAfterBody(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	code, body := call(t, ts, "POST", "/run", "{\"cmd\":\"echo hi\"} \r\n\t\n")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "hi\n", body["stdout"])
}

// A path that is not clean is served as its clean form, never redirected:
// a client follows a 301 to a POST with a GET, and the redirect dropped
// BASE_PATH.
func TestUncleanPathsAreServed(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{BasePath: "/koyeb-sandbox"}, runner: &executor.Runner{}})
	client := ts.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, path := range []string{"//run", "/./run", "/x/../run", "///run", "/koyeb-sandbox//run",
		"//koyeb-sandbox/run", "/koyeb-sandbox/./run", "/koyeb-sandbox/x/../run"} {
		req, err := http.NewRequest("POST", ts.URL+path, strings.NewReader(`{"cmd":"echo hi"}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+testSecret)
		resp, err := client.Do(req)
		require.NoError(t, err)
		var body map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body), path)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
		assert.Equal(t, "hi\n", body["stdout"], path)
	}
	for _, path := range []string{"//nope", "/koyeb-sandbox//nope", "/run/"} {
		code, body := call(t, ts, "POST", path, `{"cmd":"true"}`)
		assert.Equal(t, http.StatusNotFound, code, path)
		assert.Contains(t, body["error"], "no such endpoint", path)
	}
	resp, err := http.Get(ts.URL + "//health")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestBasePath(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{BasePath: "/koyeb-sandbox/"}, runner: &executor.Runner{}})
	code, body := call(t, ts, "POST", "/koyeb-sandbox/run", map[string]string{"cmd": "echo hi"})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "hi\n", body["stdout"])
	code, _ = call(t, ts, "POST", "/run", map[string]string{"cmd": "echo hi"})
	assert.Equal(t, http.StatusOK, code, "bare paths keep working")
	resp, err := http.Get(ts.URL + "/koyeb-sandbox/health")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	code, _ = call(t, ts, "POST", "/koyeb-sandboxrun", map[string]string{"cmd": "true"})
	assert.Equal(t, http.StatusNotFound, code)
}

func TestPorts(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{ProxyPort: 4031}, runner: &executor.Runner{}})
	code, body := call(t, ts, "GET", "/port_status", nil)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"success": true, "port": "", "proxy_port": "4031"}, body)

	code, body = call(t, ts, "POST", "/bind_port", map[string]string{"port": "8080"})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"success": true, "message": "Port binding configured", "port": "8080", "proxy_port": "4031"}, body)

	code, body = call(t, ts, "POST", "/bind_port", map[string]any{"port": 9090})
	assert.Equal(t, http.StatusConflict, code)
	assert.Equal(t, map[string]any{"success": false, "error": "Port already bound", "current_port": "8080"}, body)

	_, body = call(t, ts, "GET", "/port_status", nil)
	assert.Equal(t, "8080", body["port"])

	for _, b := range []any{nil, map[string]string{"port": "8080"}, map[string]string{"port": "1234"}} {
		code, body = call(t, ts, "POST", "/unbind_port", b)
		assert.Equal(t, http.StatusOK, code)
		assert.Equal(t, map[string]any{"success": true, "message": "Port binding removed"}, body)
	}
	code, body = call(t, ts, "POST", "/bind_port", map[string]any{"port": 9090})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "9090", body["port"])
}

// The TCP proxy itself is tested in package proxy; this checks that a bind
// through the API reaches the forwarder the agent serves.
func TestBindPortForwards(t *testing.T) {
	ts, s := newTestServer(t, testServer{})
	backend := newEchoListener(t)
	port := backend.Addr().(*net.TCPAddr).Port
	code, _ := call(t, ts, "POST", "/bind_port", map[string]any{"port": port})
	require.Equal(t, http.StatusOK, code)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.fwd.Serve(ln) }()
	conn, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(5*time.Second)))
	_, err = conn.Write([]byte("ping"))
	require.NoError(t, err)
	buf := make([]byte, 4)
	_, err = io.ReadFull(conn, buf)
	require.NoError(t, err)
	assert.Equal(t, "ping", string(buf))
	conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	require.NoError(t, s.fwd.Close(ctx))
	require.NoError(t, <-done)
}

// newEchoListener serves an echo on a loopback port until the test ends.
func newEchoListener(t *testing.T) net.Listener {
	return testutil.Serve(t, func(c net.Conn) { _, _ = io.Copy(c, c) })
}

// Every JSON reply writes <, > and & as they are, as /run and the event
// streams do: one SDK compared an error's text byte for byte.
func TestRepliesDoNotEscapeHTML(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+"/list_dir", strings.NewReader(`{"path":"/no/such/<dir>&"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testSecret)
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Contains(t, string(b), "/no/such/<dir>&")
	resp, err = ts.Client().Post(ts.URL+"/run", "application/json", strings.NewReader(`{"cmd":"true"}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Contains(t, string(b), "'Authorization: Bearer <secret>'", "the 401's words")
}
