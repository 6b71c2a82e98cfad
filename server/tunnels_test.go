package server

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
	"github.com/sandbox-executor/sandbox-executor/tunnels"
)

// echoPort serves an echo on a loopback port until the test ends: what a
// connection sends comes back, and its EOF is answered with EOF.
func echoPort(t *testing.T) int {
	t.Helper()
	ln := testutil.Serve(t, func(c net.Conn) {
		_, _ = io.Copy(c, c)
		_ = c.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, c)
	})
	return ln.Addr().(*net.TCPAddr).Port
}

func portOf(ts *httptest.Server) int { return ts.Listener.Addr().(*net.TCPAddr).Port }

// connect sends "CONNECT target" with header lines (such as
// "Proxy-Authorization: Bearer x") and extra bytes right after the
// request, and returns the connection, positioned after the reply, and
// the reply. The connection is closed when the test ends.
func connect(t *testing.T, ts *httptest.Server, target string, extra string, header ...string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", ts.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	host := target
	if strings.HasPrefix(target, "/") {
		host = ts.Listener.Addr().String()
	}
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + host + "\r\n"
	for _, h := range header {
		req += h + "\r\n"
	}
	_, err = io.WriteString(c, req+"\r\n"+extra)
	require.NoError(t, err)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	require.NoError(t, err)
	if resp.StatusCode != http.StatusOK {
		resp.Body = io.NopCloser(strings.NewReader(readString(t, resp.Body)))
	}
	return c, br, resp
}

func readString(t *testing.T, r io.Reader) string {
	t.Helper()
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	return string(b)
}

// jsonError returns the error message of a JSON error reply.
func jsonError(t *testing.T, resp *http.Response) string {
	t.Helper()
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var body struct{ Error string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	return body.Error
}

const proxyAuth = "Proxy-Authorization: Bearer " + testSecret

// basic returns the base64 of credentials, as Basic authentication sends
// them.
func basic(credentials string) string { return base64.StdEncoding.EncodeToString([]byte(credentials)) }

// A CONNECT without an accepted token is 407 with Proxy-Authenticate; the
// token is taken from Proxy-Authorization, or Authorization without it.
func TestConnectAuth(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	target := "127.0.0.1:" + strconv.Itoa(echoPort(t))
	for _, tt := range []struct {
		name   string
		header []string
		want   int
	}{
		{"none", nil, http.StatusProxyAuthRequired},
		{"wrong", []string{"Proxy-Authorization: Bearer nope"}, http.StatusProxyAuthRequired},
		{"Basic, the token as the user", []string{"Proxy-Authorization: Basic " + basic(testSecret+":x")}, http.StatusProxyAuthRequired},
		{"Basic, a wrong password", []string{"Proxy-Authorization: Basic " + basic(":nope")}, http.StatusProxyAuthRequired},
		{"Basic, not base64", []string{"Proxy-Authorization: Basic " + testSecret}, http.StatusProxyAuthRequired},
		{"a wrong Proxy-Authorization wins", []string{"Proxy-Authorization: Bearer nope", "Authorization: Bearer " + testSecret}, http.StatusProxyAuthRequired},
		{"two", []string{proxyAuth, proxyAuth}, http.StatusBadRequest},
		{"Proxy-Authorization", []string{proxyAuth}, http.StatusOK},
		{"Authorization", []string{"Authorization: bearer " + testSecret}, http.StatusOK},
		// curl -U :TOKEN, and http_proxy=http://x:TOKEN@host.
		{"Basic, the token as the password", []string{"Proxy-Authorization: Basic " + basic(":"+testSecret)}, http.StatusOK},
		{"Basic with a user", []string{"Proxy-Authorization: basic " + basic("x:"+testSecret)}, http.StatusOK},
	} {
		_, _, resp := connect(t, ts, target, "", tt.header...)
		assert.Equal(t, tt.want, resp.StatusCode, tt.name)
		if tt.want == http.StatusProxyAuthRequired {
			assert.Equal(t, []string{`Bearer realm="sandbox-executor"`, `Basic realm="sandbox-executor"`},
				resp.Header.Values("Proxy-Authenticate"), tt.name)
			assert.Contains(t, jsonError(t, resp), "proxy authentication required", tt.name)
		}
	}
}

// Targets: loopback only (403 otherwise), the agent's own port refused
// (403), a malformed one 400, nothing listening 502.
func TestConnectTargets(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	port := strconv.Itoa(echoPort(t))
	for _, tt := range []struct {
		target string
		want   int
	}{
		{"127.0.0.1:" + port, http.StatusOK},
		{"localhost:" + port, http.StatusOK},
		{"LOCALHOST.:" + port, http.StatusOK},
		{"/tunnel/" + port, http.StatusOK},
		{"10.0.0.1:" + port, http.StatusForbidden},
		{"example.com:" + port, http.StatusForbidden},
		{"0.0.0.0:" + port, http.StatusForbidden},
		{"127.0.0.1:" + strconv.Itoa(portOf(ts)), http.StatusForbidden},
		{"/tunnel/" + strconv.Itoa(portOf(ts)), http.StatusForbidden},
		{"127.0.0.1:0", http.StatusBadRequest},
		{"127.0.0.1:08080", http.StatusBadRequest},
		{"127.0.0.1", http.StatusBadRequest},
		{"/run", http.StatusBadRequest},
		{"/tunnel/x", http.StatusBadRequest},
		{"127.0.0.1:" + strconv.Itoa(testutil.ClosedPort(t)), http.StatusBadGateway},
	} {
		_, _, resp := connect(t, ts, tt.target, "", proxyAuth)
		assert.Equal(t, tt.want, resp.StatusCode, tt.target)
		if tt.want != http.StatusOK {
			assert.NotEmpty(t, jsonError(t, resp), tt.target)
			assert.True(t, resp.Close, "Connection: close, %s", tt.target)
		}
	}
}

// The path form works under the base path, and bytes sent right after the
// request, before the reply, reach the port first.
func TestConnectPathFormAndEarlyBytes(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{BasePath: "/base"}, runner: &executor.Runner{}})
	c, br, resp := connect(t, ts, "/base/tunnel/"+strconv.Itoa(echoPort(t)), "early ", proxyAuth)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "Connection Established", strings.TrimPrefix(resp.Status, "200 "))
	assert.NotEmpty(t, resp.Header.Get("X-Request-Id"))
	_, err := io.WriteString(c, "late")
	require.NoError(t, err)
	require.NoError(t, c.(*net.TCPConn).CloseWrite())
	assert.Equal(t, "early late", readString(t, br))
}

// A half-close passes through both ways: the client's EOF reaches the app,
// which still answers; the app's EOF reaches the client, which still
// sends. Then both ends close.
func TestConnectHalfClose(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	got := make(chan string, 1)
	ln := testutil.Serve(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		b, _ := br.ReadString('\n')
		if b == "client-first\n" { // the client sends, half-closes, then reads
			rest := readString(t, br)
			_, _ = io.WriteString(c, "app saw "+strconv.Quote(rest))
			return
		}
		_, _ = io.WriteString(c, "banner") // the app speaks, half-closes, then reads
		_ = c.(*net.TCPConn).CloseWrite()
		got <- readString(t, br)
	})
	target := ln.Addr().String()

	c, br, resp := connect(t, ts, target, "", proxyAuth)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, err := io.WriteString(c, "client-first\nmore")
	require.NoError(t, err)
	require.NoError(t, c.(*net.TCPConn).CloseWrite())
	assert.Equal(t, `app saw "more"`, readString(t, br), "the app saw the client's EOF and could still answer")

	c, br, resp = connect(t, ts, target, "", proxyAuth)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, err = io.WriteString(c, "app-first\n")
	require.NoError(t, err)
	assert.Equal(t, "banner", readString(t, br), "the client saw the app's EOF")
	_, err = io.WriteString(c, "after the app's EOF")
	require.NoError(t, err)
	require.NoError(t, c.(*net.TCPConn).CloseWrite())
	select {
	case s := <-got:
		assert.Equal(t, "after the app's EOF", s)
	case <-time.After(10 * time.Second):
		t.Fatal("the app never saw the client's bytes and EOF")
	}
}

// At the cap on tunnels a CONNECT is 503 until one ends; closing the
// registry (as shutdown does) ends the open tunnels.
func TestConnectCapAndClose(t *testing.T) {
	tuns := &tunnels.Registry{Max: 1}
	ts, _ := newTestServer(t, testServer{runner: &executor.Runner{}, tunnels: tuns})
	target := "127.0.0.1:" + strconv.Itoa(echoPort(t))
	c, br, resp := connect(t, ts, target, "", proxyAuth)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, _, resp = connect(t, ts, target, "", proxyAuth)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Contains(t, jsonError(t, resp), "too many tunnels")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, tuns.Close(ctx))
	_, err := br.ReadByte()
	assert.ErrorIs(t, err, io.EOF, "the tunnel was closed")
	c.Close()
	_, _, resp = connect(t, ts, target, "", proxyAuth)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "closed: shutting down")
}

// A request's context ending (the agent's shutdown cancels every one)
// ends its tunnel.
func TestConnectEndsWithRequestContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tuns := &tunnels.Registry{}
	ts, _ := newTestServer(t, testServer{runner: &executor.Runner{}, tunnels: tuns, base: ctx})
	_, br, resp := connect(t, ts, "127.0.0.1:"+strconv.Itoa(echoPort(t)), "", proxyAuth)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Eventually(t, func() bool { return len(tuns.List()) == 1 }, 5*time.Second, 5*time.Millisecond)
	cancel()
	_, err := br.ReadByte()
	assert.ErrorIs(t, err, io.EOF)
	require.Eventually(t, func() bool { return len(tuns.List()) == 0 }, 5*time.Second, 5*time.Millisecond)
}

// wsDial opens /tunnel_ws?port=port with the token as a subprotocol, as a
// browser would.
func wsDial(t *testing.T, ts *httptest.Server, query string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	token := wsTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(testSecret))
	c, resp, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(ts.URL, "http")+"/tunnel_ws"+query,
		&websocket.DialOptions{Subprotocols: []string{wsProtocol, token}})
	if err == nil {
		t.Cleanup(func() { c.CloseNow() })
	}
	return c, resp, err
}

// /tunnel_ws carries the bytes in binary messages; the app's EOF closes
// the WebSocket. Its refusals come before the upgrade.
func TestTunnelWebSocket(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	c, _, err := wsDial(t, ts, "?port="+strconv.Itoa(echoPort(t)))
	require.NoError(t, err)
	nc := websocket.NetConn(t.Context(), c, websocket.MessageBinary)
	_, err = io.WriteString(nc, "through a websocket")
	require.NoError(t, err)
	buf := make([]byte, len("through a websocket"))
	_, err = io.ReadFull(nc, buf)
	require.NoError(t, err)
	assert.Equal(t, "through a websocket", string(buf))
	require.NoError(t, nc.Close(), "a normal closure")

	for query, want := range map[string]int{
		"":        http.StatusBadRequest,
		"?port=0": http.StatusBadRequest,
		"?port=" + strconv.Itoa(testutil.ClosedPort(t)): http.StatusBadGateway,
		"?port=" + strconv.Itoa(portOf(ts)):             http.StatusForbidden,
	} {
		_, resp, err := wsDial(t, ts, query)
		require.Error(t, err, query)
		require.NotNil(t, resp, query)
		assert.Equal(t, want, resp.StatusCode, query)
	}
	resp := request(t, ts, http.MethodGet, "/tunnel_ws?port="+strconv.Itoa(echoPort(t)), nil)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "not an upgrade")
	resp.Body.Close()
}

// When the app closes, a WebSocket tunnel ends with a normal closure, which
// the client reads as EOF.
func TestTunnelWebSocketAppCloses(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	ln := testutil.Serve(t, func(c net.Conn) { _, _ = io.WriteString(c, "bye") })
	c, _, err := wsDial(t, ts, "?port="+strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	require.NoError(t, err)
	nc := websocket.NetConn(t.Context(), c, websocket.MessageBinary)
	assert.Equal(t, "bye", readString(t, nc))
}

// /list_tunnels shows the open tunnels of both kinds with the bytes each
// moved.
func TestListTunnels(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	port := echoPort(t)
	c, br, resp := connect(t, ts, "127.0.0.1:"+strconv.Itoa(port), "", proxyAuth)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	msg := strings.Repeat("x", 10_000)
	_, err := io.WriteString(c, msg)
	require.NoError(t, err)
	_, err = io.ReadFull(br, make([]byte, len(msg)))
	require.NoError(t, err)
	ws, _, err := wsDial(t, ts, "?port="+strconv.Itoa(port))
	require.NoError(t, err)
	_ = ws

	type item struct {
		ID            uint64    `json:"id"`
		Kind          string    `json:"kind"`
		Port          int       `json:"port"`
		Target        string    `json:"target"`
		StartedAt     time.Time `json:"started_at"`
		BytesToPort   int64     `json:"bytes_to_port"`
		BytesFromPort int64     `json:"bytes_from_port"`
	}
	var list struct{ Tunnels []item }
	require.Eventually(t, func() bool {
		resp := request(t, ts, http.MethodGet, "/list_tunnels", nil)
		defer resp.Body.Close()
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
		return len(list.Tunnels) == 2 && list.Tunnels[0].BytesFromPort == 10_000
	}, 5*time.Second, 10*time.Millisecond, "%+v", list)
	first, second := list.Tunnels[0], list.Tunnels[1]
	assert.Equal(t, "connect", first.Kind)
	assert.Equal(t, port, first.Port)
	assert.Equal(t, "127.0.0.1:"+strconv.Itoa(port), first.Target)
	assert.Equal(t, int64(10_000), first.BytesToPort)
	assert.WithinDuration(t, time.Now(), first.StartedAt, time.Minute)
	assert.Equal(t, "ws", second.Kind)
	assert.Greater(t, second.ID, first.ID)
}
