package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/client"
	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

// echoPort serves an echo on a loopback port until the test ends; the
// echo answers EOF with EOF.
func echoPort(t *testing.T) string {
	t.Helper()
	ln := testutil.Serve(t, func(c net.Conn) {
		_, _ = io.Copy(c, c)
		_ = c.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, c)
	})
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// Without -listen, stdin and stdout are the tunnel: stdin's EOF reaches
// the port (a CONNECT tunnel half-closes) and the port's answer comes out.
func TestCLITunnelStdio(t *testing.T) {
	a := startCLIAgent(t)
	r := runCLI(t, a.env, []byte("ping through the tunnel"), "tunnel", "-port", echoPort(t))
	assert.Equal(t, cliResult{0, "ping through the tunnel", ""}, r)
}

// With -ws the bytes go over a WebSocket; one has no half-close, so stdin
// stays open until the answer is in.
func TestCLITunnelStdioWebSocket(t *testing.T) {
	a := startCLIAgent(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		o := options{stdin: inR, stdout: outW}
		err := o.run(t.Context(), []string{"tunnel", "-ws", "-port", echoPort(t)}, getenv(a.env), io.Discard)
		outW.Close()
		done <- exitOf(err)
	}()
	_, err := io.WriteString(inW, "over a websocket")
	require.NoError(t, err)
	got := make([]byte, len("over a websocket"))
	_, err = io.ReadFull(outR, got)
	require.NoError(t, err)
	assert.Equal(t, "over a websocket", string(got))
	inW.Close()
	_, _ = io.Copy(io.Discard, outR)
	select {
	case code := <-done:
		assert.Equal(t, 0, code)
	case <-time.After(10 * time.Second):
		t.Fatal("the tunnel did not end")
	}
}

func exitOf(err error) int {
	if e, ok := err.(exitCodeError); ok {
		return e.code
	}
	if err != nil {
		return -1
	}
	return 0
}

// With -listen every accepted connection gets a tunnel of its own, until
// the command is interrupted.
func TestCLITunnelListen(t *testing.T) {
	a := startCLIAgent(t)
	ctx, cancel := context.WithCancel(t.Context())
	stderr := &testutil.SyncBuffer{}
	done := make(chan int, 1)
	go func() {
		o := options{stdout: io.Discard}
		err := o.run(ctx, []string{"tunnel", "-port", echoPort(t), "-listen", "127.0.0.1:0"}, getenv(a.env), stderr)
		done <- exitOf(err)
	}()
	addrRe := regexp.MustCompile(`forwarding (\S+) to port`)
	require.Eventually(t, func() bool { return addrRe.MatchString(stderr.String()) }, 10*time.Second, 10*time.Millisecond)
	addr := addrRe.FindStringSubmatch(stderr.String())[1]
	for i := range 3 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		msg := "connection " + strconv.Itoa(i)
		_, err = io.WriteString(c, msg)
		require.NoError(t, err)
		require.NoError(t, c.(*net.TCPConn).CloseWrite())
		got, err := io.ReadAll(c)
		require.NoError(t, err)
		assert.Equal(t, msg, string(got))
		c.Close()
	}
	idle, err := net.Dial("tcp", addr) // a live one when the command stops
	require.NoError(t, err)
	defer idle.Close()
	require.Eventually(t, func() bool {
		ts, err := a.c.ListTunnels(t.Context())
		return err == nil && len(ts) == 1
	}, 10*time.Second, 10*time.Millisecond)
	cancel()
	select {
	case code := <-done:
		assert.Equal(t, exitInterrupted, code)
	case <-time.After(10 * time.Second):
		t.Fatal("tunnel -listen did not stop")
	}
	_, err = bufio.NewReader(idle).ReadByte()
	assert.ErrorIs(t, err, io.EOF, "the live connection was closed")
}

// The errors say what to do: a refused token, a closed port, an edge that
// does not pass CONNECT.
func TestCLITunnelErrors(t *testing.T) {
	a := startCLIAgent(t)
	closed := strconv.Itoa(testutil.ClosedPort(t))
	r := runCLI(t, map[string]string{"SANDBOX_URL": a.url, "SANDBOX_SECRET": "wrong"}, nil, "tunnel", "-port", echoPort(t))
	assert.Equal(t, 1, r.code)
	assert.Equal(t, "sandbox-executor tunnel: the agent refused the token (407): set SANDBOX_SECRET (or -token) to the agent's secret\n", r.stderr)
	r = runCLI(t, map[string]string{"SANDBOX_URL": a.url, "SANDBOX_SECRET": "wrong"}, nil, "tunnel", "-ws", "-port", echoPort(t))
	assert.Contains(t, r.stderr, "the agent refused the token (401)")
	r = runCLI(t, map[string]string{"SANDBOX_URL": a.url, "SANDBOX_SECRET": "wrong"}, nil, "tunnel", "-listen", "127.0.0.1:0", "-port", "22")
	assert.Contains(t, r.stderr, "the agent refused the token (401)")

	r = runCLI(t, a.env, nil, "tunnel", "-port", closed)
	assert.Equal(t, 1, r.code)
	assert.Equal(t, "sandbox-executor tunnel: nothing is listening on port "+closed+" in the sandbox (502 Bad Gateway)\n", r.stderr)

	edge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusMethodNotAllowed)
	}))
	defer edge.Close()
	r = runCLI(t, map[string]string{"SANDBOX_URL": edge.URL, "SANDBOX_SECRET": testSecret}, nil, "tunnel", "-port", "22")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "does not pass CONNECT; try -ws")

	r = runCLI(t, a.env, nil, "tunnel")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "-port wants the sandbox's port")
}

// The agent's shutdown ends its tunnels.
func TestShutdownEndsTunnels(t *testing.T) {
	a := startCLIAgent(t)
	conn, err := a.c.DialTunnel(t.Context(), atoi(t, echoPort(t)), client.DialOptions{})
	require.NoError(t, err)
	defer conn.Close()
	_, err = a.stop(t)
	require.NoError(t, err)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the tunnel was closed by the agent's shutdown")
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}

// The agent's own API and proxy ports are refused to tunnels: no loops.
func TestTunnelOwnPortsRefused(t *testing.T) {
	a := startCLIAgent(t)
	for _, addr := range []net.Addr{a.api, a.proxy} {
		for _, ws := range []bool{false, true} {
			_, err := a.c.DialTunnel(t.Context(), addr.(*net.TCPAddr).Port, client.DialOptions{WebSocket: ws})
			var ae *client.Error
			require.ErrorAs(t, err, &ae, "%s ws %v", addr, ws)
			assert.Equal(t, http.StatusForbidden, ae.StatusCode, "%s ws %v", addr, ws)
		}
	}
}
