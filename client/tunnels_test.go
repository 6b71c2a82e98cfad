package client_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/client"
	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
	"github.com/sandbox-executor/sandbox-executor/server"
)

// echoPort serves an echo on a loopback port until the test ends; the
// echo answers EOF with EOF. If greeting is not empty it is sent first.
func echoPort(t *testing.T, greeting string) int {
	t.Helper()
	ln := testutil.Serve(t, func(c net.Conn) {
		_, _ = io.WriteString(c, greeting)
		_, _ = io.Copy(c, c)
		_ = c.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, c)
	})
	return ln.Addr().(*net.TCPAddr).Port
}

// Both kinds of tunnel carry bytes both ways, under a base path too; a
// CONNECT tunnel passes a half-close, and the port's greeting that came
// with the reply is read first.
func TestDialTunnel(t *testing.T) {
	a := startAgent(t, agentConfig{server: server.Config{BasePath: "/base"}})
	port := echoPort(t, "hello ")
	for _, ws := range []bool{false, true} {
		conn, err := a.c.DialTunnel(t.Context(), port, client.DialOptions{WebSocket: ws})
		require.NoError(t, err, "ws %v", ws)
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = io.WriteString(conn, "world")
		require.NoError(t, err)
		if !ws {
			require.NoError(t, conn.(interface{ CloseWrite() error }).CloseWrite())
			got, err := io.ReadAll(conn)
			require.NoError(t, err)
			assert.Equal(t, "hello world", string(got))
		} else {
			got := make([]byte, len("hello world"))
			_, err = io.ReadFull(conn, got)
			require.NoError(t, err)
			assert.Equal(t, "hello world", string(got))
		}
		require.NoError(t, conn.Close())
	}
}

// Refusals are the agent's *Error: a refused token, a closed port.
func TestDialTunnelRefused(t *testing.T) {
	a := startAgent(t, agentConfig{})
	closed := testutil.ClosedPort(t)
	for _, ws := range []bool{false, true} {
		_, err := a.c.DialTunnel(t.Context(), closed, client.DialOptions{WebSocket: ws})
		var ae *client.Error
		require.ErrorAs(t, err, &ae, "ws %v", ws)
		assert.Equal(t, http.StatusBadGateway, ae.StatusCode)
		assert.Equal(t, "nothing is listening on port "+strconv.Itoa(closed)+" in the sandbox", ae.Message)

		bad := newClient(t, a.ts, a.ts.URL, "wrong")
		_, err = bad.DialTunnel(t.Context(), echoPort(t, ""), client.DialOptions{WebSocket: ws})
		require.ErrorAs(t, err, &ae, "ws %v", ws)
		assert.Contains(t, []int{http.StatusUnauthorized, http.StatusProxyAuthRequired}, ae.StatusCode)
		assert.Contains(t, ae.Error(), "the agent refused the token")
	}
}

// An edge that does not pass CONNECT, whether it refuses it or answers it
// with a page, is told apart from the agent's refusals.
func TestDialTunnelEdgeWithoutConnect(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"405": func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		},
		"a page": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<html>welcome</html>")
		},
		"a JSON 502 of its own": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, `{"message":"upstream"}`)
		},
	} {
		edge := httptest.NewServer(h)
		c, err := client.New(edge.URL, "t", client.WithHTTPClient(edge.Client()))
		require.NoError(t, err)
		_, err = c.DialTunnel(t.Context(), 22, client.DialOptions{})
		assert.ErrorIs(t, err, client.ErrConnectUnsupported, name)
		var ae *client.Error
		assert.False(t, errors.As(err, &ae), name)
		edge.Close()
	}
}

func TestExposeAndListTunnels(t *testing.T) {
	a := startAgent(t, agentConfig{})
	ctx := t.Context()
	require.NoError(t, a.c.ExposePort(ctx, 8000, false))
	require.NoError(t, a.c.ExposePort(ctx, 3000, true))
	ports, err := a.c.ExposedPorts(ctx)
	require.NoError(t, err)
	assert.Equal(t, []client.ExposedPort{{Port: 3000, Public: true}, {Port: 8000}}, ports)
	removed, err := a.c.UnexposePort(ctx, 8000)
	require.NoError(t, err)
	assert.True(t, removed)
	removed, err = a.c.UnexposePort(ctx, 8000)
	require.NoError(t, err)
	assert.False(t, removed)

	port := echoPort(t, "")
	conn, err := a.c.DialTunnel(ctx, port, client.DialOptions{})
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "12345")
	require.NoError(t, err)
	_, err = io.ReadFull(conn, make([]byte, 5))
	require.NoError(t, err)
	var ts []client.Tunnel
	require.Eventually(t, func() bool {
		ts, err = a.c.ListTunnels(ctx)
		require.NoError(t, err)
		return len(ts) == 1 && ts[0].BytesFromPort == 5
	}, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, "connect", ts[0].Kind)
	assert.Equal(t, port, ts[0].Port)
	assert.Equal(t, int64(5), ts[0].BytesToPort)
}

// A WebSocket tunnel carries 16 MiB each way byte for byte through the
// agent, whose pings (every 5 ms here) come between the data; the ctx it
// was opened with may end meanwhile. Its Close ends the tunnel at the
// agent.
func TestDialTunnelWebSocketBulk(t *testing.T) {
	a := startAgent(t, agentConfig{server: server.Config{KeepAlive: 5 * time.Millisecond}})
	ctx, cancel := context.WithCancel(t.Context())
	conn, err := a.c.DialTunnel(ctx, echoPort(t, ""), client.DialOptions{WebSocket: true})
	require.NoError(t, err)
	cancel() // it bounds the opening only
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	data := make([]byte, 16<<20)
	for i := range data {
		data[i] = byte(i/8) ^ byte(i*7)
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := io.Copy(conn, bytes.NewReader(data[:len(data)/2])) // ReadFrom
		if err == nil {
			_, err = conn.Write(data[len(data)/2:])
		}
		wrote <- err
	}()
	h := sha256.New()
	_, err = io.CopyN(h, conn, int64(len(data)))
	require.NoError(t, err)
	require.NoError(t, <-wrote)
	assert.Equal(t, sha256.Sum256(data), [32]byte(h.Sum(nil)))

	_, err = io.WriteString(conn, "still there")
	require.NoError(t, err)
	got := make([]byte, len("still there"))
	_, err = io.ReadFull(conn, got)
	require.NoError(t, err)
	assert.Equal(t, "still there", string(got))

	require.NoError(t, conn.Close())
	require.Eventually(t, func() bool {
		ts, err := a.c.ListTunnels(t.Context())
		require.NoError(t, err)
		return len(ts) == 0
	}, 5*time.Second, 10*time.Millisecond)
}

// A WebSocket tunnel passes a TLS edge that passes upgrades (a reverse
// proxy), dialled with the TLS settings of the Client's transport.
func TestDialTunnelWebSocketThroughTLSEdge(t *testing.T) {
	a := startAgent(t, agentConfig{})
	target, err := url.Parse(a.ts.URL)
	require.NoError(t, err)
	edge := httptest.NewTLSServer(httputil.NewSingleHostReverseProxy(target))
	defer edge.Close()
	c, err := client.New(edge.URL, testSecret, client.WithHTTPClient(edge.Client()))
	require.NoError(t, err)
	conn, err := c.DialTunnel(t.Context(), echoPort(t, "hi "), client.DialOptions{WebSocket: true})
	require.NoError(t, err)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = io.WriteString(conn, "over TLS")
	require.NoError(t, err)
	got := make([]byte, len("hi over TLS"))
	_, err = io.ReadFull(conn, got)
	require.NoError(t, err)
	assert.Equal(t, "hi over TLS", string(got))

	_, err = c.DialTunnel(t.Context(), testutil.ClosedPort(t), client.DialOptions{WebSocket: true})
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusBadGateway, ae.StatusCode)
}

// An edge that does not upgrade the WebSocket (a page of its own) is told
// apart from the agent's refusals, and both from no agent at all.
func TestDialTunnelWebSocketNotUpgraded(t *testing.T) {
	edge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, "<html>bad gateway</html>")
	}))
	defer edge.Close()
	c, err := client.New(edge.URL, "t", client.WithHTTPClient(edge.Client()))
	require.NoError(t, err)
	_, err = c.DialTunnel(t.Context(), 22, client.DialOptions{WebSocket: true})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "did not upgrade /tunnel_ws to a WebSocket: 502 Bad Gateway")
	var ae *client.Error
	assert.False(t, errors.As(err, &ae))
	var ce *client.ConnError
	assert.False(t, errors.As(err, &ce))

	gone, err := client.New("http://127.0.0.1:"+strconv.Itoa(testutil.ClosedPort(t)), "t")
	require.NoError(t, err)
	_, err = gone.DialTunnel(t.Context(), 22, client.DialOptions{WebSocket: true})
	assert.ErrorAs(t, err, &ce, "no agent at all")
}
