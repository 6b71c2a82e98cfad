package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

// logLines parses the JSON lines of buf, as many as are complete.
func logLines(t *testing.T, buf *testutil.SyncBuffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(buf.String(), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		lines = append(lines, m)
	}
	return lines
}

// findLine waits for a log line with the given message whose fields
// include want, and returns it.
func findLine(t *testing.T, buf *testutil.SyncBuffer, msg string, want map[string]any) map[string]any {
	t.Helper()
	var found map[string]any
	require.Eventually(t, func() bool {
	lines:
		for _, l := range logLines(t, buf) {
			if l["message"] != msg {
				continue
			}
			for k, v := range want {
				if l[k] != v {
					continue lines
				}
			}
			found = l
			return true
		}
		return false
	}, 5*time.Second, 5*time.Millisecond, "no %q line with %v in:\n%s", msg, want, buf.String())
	return found
}

func debugLogger(buf *testutil.SyncBuffer) zerolog.Logger {
	return zerolog.New(buf).Level(zerolog.DebugLevel)
}

// Every reply carries an X-Request-Id: the request's own if it sent a
// usable one, else a new one; and the access-log line carries it too, with
// the remote address and the duration in milliseconds.
func TestRequestIDAndAccessLog(t *testing.T) {
	var buf testutil.SyncBuffer
	ts, _ := newTestServer(t, testServer{log: debugLogger(&buf)})
	get := func(id string) string {
		req, err := http.NewRequest(http.MethodGet, ts.URL+"/health", nil)
		require.NoError(t, err)
		if id != "" {
			req.Header.Set("X-Request-Id", id)
		}
		resp, err := ts.Client().Do(req)
		require.NoError(t, err)
		drain(t, resp)
		return resp.Header.Get("X-Request-Id")
	}
	a, b := get(""), get("")
	assert.NotEmpty(t, a)
	assert.NotEqual(t, a, b)
	assert.Equal(t, "from-the-proxy-42", get("from-the-proxy-42"))
	for _, bad := range []string{"two words", strings.Repeat("x", maxRequestIDLen+1), "é"} {
		got := get(bad)
		assert.NotEqual(t, bad, got)
		assert.NotEmpty(t, got)
	}

	line := findLine(t, &buf, "request", map[string]any{"request_id": "from-the-proxy-42"})
	assert.Equal(t, "debug", line["level"])
	assert.Equal(t, "GET", line["method"])
	assert.Equal(t, "/health", line["path"])
	assert.Equal(t, float64(200), line["status"])
	assert.Positive(t, line["bytes"])
	assert.IsType(t, float64(0), line["duration_ms"])
	assert.True(t, strings.HasPrefix(line["remote"].(string), "127.0.0.1:"), line["remote"])
	assert.NotContains(t, line, "duration", "the unit is in the name")
}

// The reason of a 4xx is logged at debug level, with the request's id;
// the access line of a failure is at info.
func TestRefusalLogged(t *testing.T) {
	var buf testutil.SyncBuffer
	ts, _ := newTestServer(t, testServer{log: debugLogger(&buf)})
	resp := request(t, ts, http.MethodPost, "/run", map[string]any{"cwd": "/"})
	drain(t, resp)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	id := resp.Header.Get("X-Request-Id")
	refused := findLine(t, &buf, "request refused", map[string]any{"request_id": id})
	assert.Equal(t, "debug", refused["level"])
	assert.Equal(t, float64(400), refused["status"])
	assert.Contains(t, refused["error"], "cmd")
	access := findLine(t, &buf, "request", map[string]any{"request_id": id})
	assert.Equal(t, "info", access["level"])

	resp, err := ts.Client().Get(ts.URL + "/list_processes")
	require.NoError(t, err)
	drain(t, resp)
	findLine(t, &buf, "request refused", map[string]any{"request_id": resp.Header.Get("X-Request-Id"), "status": float64(401)})
}

// A handler that aborts its reply by panicking with http.ErrAbortHandler
// still gets its access-log line and its count.
func TestAbortedRequestLogged(t *testing.T) {
	var buf testutil.SyncBuffer
	// /abort is not in the document, but the checker never judges it: the
	// panic passes through the checker too.
	ts, _ := newTestServer(t, testServer{runner: &executor.Runner{}, log: debugLogger(&buf), setup: func(s *Server) {
		s.router.Handle("/abort", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			panic(http.ErrAbortHandler)
		}))
	}})
	req, err := http.NewRequest(http.MethodGet, ts.URL+"/abort", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testSecret)
	req.Header.Set("X-Request-Id", "abort-1")
	_, err = ts.Client().Do(req)
	require.Error(t, err, "the connection is cut without a reply")

	line := findLine(t, &buf, "request", map[string]any{"request_id": "abort-1"})
	assert.Equal(t, true, line["aborted"])
	assert.Equal(t, "info", line["level"])
	assert.Equal(t, float64(0), line["status"])
	v, ok := value(scrape(t, ts), "sandbox_http_requests_total", "route", "/abort", "code", codeAborted)
	assert.True(t, ok)
	assert.Equal(t, 1.0, v)
}

// A pool sandbox's claim is logged at info level.
func TestPoolClaimLogged(t *testing.T) {
	var buf testutil.SyncBuffer
	auth, err := NewPoolAuth(filepath.Join(t.TempDir(), "secret"))
	require.NoError(t, err)
	ts, _ := newTestServer(t, testServer{runner: &executor.Runner{}, auth: auth, log: zerolog.New(&buf).Level(zerolog.InfoLevel)})
	for range 2 {
		resp := request(t, ts, http.MethodGet, "/list_processes", nil)
		drain(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	claim := findLine(t, &buf, "pool sandbox claimed", nil)
	assert.Equal(t, "info", claim["level"])
	assert.NotEmpty(t, claim["request_id"])
	assert.Contains(t, claim["remote"], "127.0.0.1:")
	assert.Equal(t, 1, strings.Count(buf.String(), "pool sandbox claimed"), "only the claim")
}

// A request without the token costs one short line at debug level, however
// long its path: whoever has no token cannot fill the log.
func TestUnauthorizedLogSmall(t *testing.T) {
	var buf testutil.SyncBuffer
	ts, _ := newTestServer(t, testServer{log: debugLogger(&buf)})
	long := "/" + strings.Repeat("a", 8000) // under the request line's limit
	for _, path := range []string{long, "/run" + long} {
		resp, err := ts.Client().Get(ts.URL + path)
		require.NoError(t, err)
		drain(t, resp)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		id := resp.Header.Get("X-Request-Id")
		access := findLine(t, &buf, "request", map[string]any{"request_id": id})
		assert.Equal(t, "debug", access["level"], "a 401 is anyone's to cause")
		logged := access["path"].(string)
		require.LessOrEqual(t, len(logged), maxLoggedPath+32, "the path is cut")
		assert.True(t, strings.HasPrefix(logged, path[:maxLoggedPath]), logged)
		assert.True(t, strings.HasSuffix(logged, "... ("+strconv.Itoa(len(path))+" bytes)"), "the cut is said: %s", logged)
		for _, l := range logLines(t, &buf) {
			if l["request_id"] == id {
				assert.Equal(t, "debug", l["level"], l)
			}
		}
	}
	assert.Less(t, len(buf.String()), 4<<10, "two refusals, a few short lines")
}

// A request line over 8 KiB is refused with 414 before authentication, as
// the connection's last reply; one at the limit is routed as usual.
func TestLongRequestLine(t *testing.T) {
	var buf testutil.SyncBuffer
	ts, _ := newTestServer(t, testServer{log: debugLogger(&buf)})
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	target := "/run?q=" + strings.Repeat("x", 9<<10)
	_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", target)
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	body := readString(t, resp.Body)
	assert.Equal(t, http.StatusRequestURITooLong, resp.StatusCode, body)
	assert.True(t, resp.Close, "the connection's last reply")
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.Contains(t, body, "request line too long")
	access := findLine(t, &buf, "request", map[string]any{"request_id": resp.Header.Get("X-Request-Id")})
	assert.Equal(t, "debug", access["level"])
	assert.Less(t, len(access["path"].(string)), maxLoggedPath+32)

	// With the token, through the client and the document's checker.
	resp = request(t, ts, http.MethodPost, target, map[string]any{"cmd": "true"})
	drain(t, resp)
	assert.Equal(t, http.StatusRequestURITooLong, resp.StatusCode)
	// A CONNECT too, before its own authentication.
	_, _, resp = connect(t, ts, "/tunnel/"+strings.Repeat("1", 9<<10), "")
	assert.Equal(t, http.StatusRequestURITooLong, resp.StatusCode)
	// At the limit: "POST " + target + " HTTP/1.1" is 8 KiB exactly.
	target = "/run?q=" + strings.Repeat("x", maxRequestLine-len("POST /run?q= HTTP/1.1"))
	resp = request(t, ts, http.MethodPost, target, map[string]any{"cmd": "true"})
	drain(t, resp)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}
