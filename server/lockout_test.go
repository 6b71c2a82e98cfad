package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/internal/connlimit"
)

// These tests are attacks on the connection limits: a client without
// the token must not be able to hold connections, and so file
// descriptors, for long, nor keep the owner out.

// rawConn is a client connection written by hand, to send what no HTTP
// client would.
type rawConn struct {
	net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &rawConn{Conn: c, br: bufio.NewReader(c)}
}

func (c *rawConn) send(t *testing.T, s string) {
	t.Helper()
	_, err := io.WriteString(c, s)
	require.NoError(t, err)
}

// response reads one response, waiting at most 5 s, and its body.
func (c *rawConn) response(t *testing.T) (*http.Response, string) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	resp, err := http.ReadResponse(c.br, nil)
	require.NoError(t, err, "no response within 5 s")
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	return resp, string(b)
}

// assertClosed asserts that the server closes the connection within 5 s.
func (c *rawConn) assertClosed(t *testing.T) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err := io.Copy(io.Discard, c.br)
	var ne net.Error
	assert.False(t, errors.As(err, &ne) && ne.Timeout(), "the connection was still open after 5 s")
}

// assertOpen asserts that the server leaves the connection open for d.
func (c *rawConn) assertOpen(t *testing.T, d time.Duration) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(d)))
	_, err := c.br.Peek(1)
	var ne net.Error
	assert.True(t, errors.As(err, &ne) && ne.Timeout(), "want the connection open and silent, got %v", err)
	require.NoError(t, c.SetReadDeadline(time.Time{}))
}

const shortBodyRequest = "POST /run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"

// Before the fix net/http read the declared body before sending the 401,
// and waited for it for ever.
func TestUnauthenticatedShortBodyGets401AndClose(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	c := dialRaw(t, ts.Listener.Addr().String())
	c.send(t, shortBodyRequest)
	resp, body := c.response(t)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.True(t, resp.Close, "the 401 says Connection: close")
	assert.Equal(t, `Bearer realm="sandbox-executor"`, resp.Header.Get("WWW-Authenticate"))
	assert.Contains(t, body, "unauthorized")
	c.assertClosed(t)
}

// An error before the body was read to its end closes the connection for
// the same reason; one after it keeps it.
func TestEarlyErrorsCloseTheConnection(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	auth := "Authorization: Bearer " + testSecret + "\r\n"

	c := dialRaw(t, ts.Listener.Addr().String())
	c.send(t, "POST /run HTTP/1.1\r\nHost: x\r\n"+auth+"Content-Length: 100\r\n\r\n{\"cmd\" x")
	resp, body := c.response(t)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	assert.True(t, resp.Close)
	c.assertClosed(t)

	c = dialRaw(t, ts.Listener.Addr().String())
	c.send(t, "POST /nope HTTP/1.1\r\nHost: x\r\n"+auth+"Content-Length: 100\r\n\r\n{")
	resp, _ = c.response(t)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	c.assertClosed(t)

	c = dialRaw(t, ts.Listener.Addr().String())
	for range 2 {
		c.send(t, "POST /run HTTP/1.1\r\nHost: x\r\n"+auth+"Content-Length: 2\r\n\r\n{}")
		resp, body = c.response(t)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
		assert.Contains(t, body, "cmd is required")
		assert.False(t, resp.Close, "the body was read: the connection is kept")
	}
}

// A JSON body has BodyTimeout to arrive, however it trickles.
func TestTricklingBodyIsCutAtBodyTimeout(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{BodyTimeout: 300 * time.Millisecond}, runner: &executor.Runner{}})
	body := `{"cmd":"echo hi","cwd":"/tmp","env":{"A":"1"}}`
	c := dialRaw(t, ts.Listener.Addr().String())
	c.send(t, "POST /run HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+testSecret+
		"\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the trickle: a byte every 50 ms, 2.3 s in all; it ends at the first failed write
		defer wg.Done()
		for i := range len(body) {
			if _, err := c.Write([]byte{body[i]}); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	defer wg.Wait()
	defer c.Close() // ends the trickle if the test fails first
	resp, reply := c.response(t)
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode, reply)
	assert.Contains(t, reply, "request body not received within 300ms")
	assert.True(t, resp.Close)
	c.assertClosed(t)
}

// The body's deadline is cleared once it is read: a command that runs
// longer than BodyTimeout is not cut, and its client leaving is still seen.
func TestRunLongerThanBodyTimeout(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{BodyTimeout: 100 * time.Millisecond, UnauthTimeout: 100 * time.Millisecond}, runner: &executor.Runner{}})
	code, body := call(t, ts, "POST", "/run", map[string]string{"cmd": "sleep 1; echo done"})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "done\n", body["stdout"])
}

// A connection that never authenticates is closed after UnauthTimeout
// idle; one that did keeps the server's own idle timeout.
func TestUnauthenticatedIdleConnectionIsClosed(t *testing.T) {
	const timeout = 300 * time.Millisecond
	ts, _ := newTestServer(t, testServer{cfg: Config{UnauthTimeout: timeout}, runner: &executor.Runner{}})
	addr := ts.Listener.Addr().String()

	idle := dialRaw(t, addr)
	idle.assertClosed(t)

	// /health does not authenticate either: after it, the same timeout.
	health := dialRaw(t, addr)
	health.send(t, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, _ := health.response(t)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	health.assertClosed(t)

	authed := dialRaw(t, addr)
	req := "GET /list_processes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + testSecret + "\r\n\r\n"
	authed.send(t, req)
	resp, _ = authed.response(t)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	authed.assertOpen(t, 3*timeout)
	authed.send(t, req)
	resp, _ = authed.response(t)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// A GET that authenticates on a fresh connection lifts the short timeout
// already in force: net/http reads such a connection in the background
// from the start, and a read timing out would cancel the request.
func TestStreamOnFreshConnectionOutlivesUnauthTimeout(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{UnauthTimeout: 200 * time.Millisecond}, runner: &executor.Runner{}})
	code, started := call(t, ts, "POST", "/start_process", map[string]string{"cmd": "sleep 1; echo done"})
	require.Equal(t, http.StatusCreated, code)
	c := dialRaw(t, ts.Listener.Addr().String())
	c.send(t, "GET /process_logs_streaming?id="+started["id"].(string)+" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+testSecret+"\r\n\r\n")
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(c.br, nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"data":"done"`)
	assert.Contains(t, string(b), "event: complete")
}

// At the cap, a new connection takes the slot of the oldest one that
// never authenticated: clients without the token cannot keep the owner
// out by holding connections.
func TestConnectionCapEvictsUnauthenticated(t *testing.T) {
	const maxConns = 8
	ts, _ := newTestServer(t, testServer{cfg: Config{MaxConns: maxConns}, runner: &executor.Runner{}})
	addr := ts.Listener.Addr().String()
	ln := ts.Listener.(*connlimit.Listener)
	var attackers []*rawConn
	for i := range 5 * maxConns {
		c := dialRaw(t, addr)
		if i%2 == 0 {
			c.send(t, shortBodyRequest)
		} else {
			c.send(t, "POST /run HTTP/1.1\r\nHost: x\r\n") // headers never finished
		}
		attackers = append(attackers, c)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	for range 3 {
		req, err := http.NewRequest("POST", ts.URL+"/run", strings.NewReader(`{"cmd":"echo hi"}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+testSecret)
		resp, err := client.Do(req)
		require.NoError(t, err)
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, out)
		assert.Equal(t, "hi\n", out["stdout"])
	}
	open := ln.Open()
	assert.LessOrEqual(t, open, maxConns)
	for _, c := range attackers[:maxConns] { // the oldest were evicted or answered
		c.assertClosed(t)
	}
}

// When every slot is held by an authenticated connection, a new one is
// answered 503 at once, in JSON, and closed.
func TestConnectionCapAnswers503(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{MaxConns: 2}, runner: &executor.Runner{}})
	addr := ts.Listener.Addr().String()
	req := "GET /list_processes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + testSecret + "\r\n\r\n"
	for range 2 {
		c := dialRaw(t, addr)
		c.send(t, req)
		resp, _ := c.response(t)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	c := dialRaw(t, addr)
	c.send(t, req)
	resp, body := c.response(t)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.JSONEq(t, `{"error":"too many connections (limit 2): try again later"}`, body)
	assert.True(t, resp.Close)
	c.assertClosed(t)
}
