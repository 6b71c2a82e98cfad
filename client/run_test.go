package client_test

import (
	"bytes"
	"encoding/json"
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

	"github.com/sandbox-executor/sandbox-executor/client"
	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
	"github.com/sandbox-executor/sandbox-executor/server"
)

func TestRun(t *testing.T) {
	a := startAgent(t, agentConfig{})
	dir := t.TempDir()
	res, err := a.c.Run(t.Context(), client.Command{
		Cmd: `pwd; echo "$GREETING"; echo oops >&2; exit 3`,
		Cwd: dir, Env: map[string]string{"GREETING": "hello"},
	})
	require.NoError(t, err)
	assert.Equal(t, dir+"\nhello\n", res.Stdout)
	assert.Equal(t, "oops\n", res.Stderr)
	assert.Equal(t, 3, res.Code)
	assert.Equal(t, "Non-zero exit code", res.Error)

	res, err = a.c.Run(t.Context(), client.Command{Cmd: "echo before; sleep 10", Timeout: 200 * time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, 124, res.Code)
	assert.Equal(t, "before\n", res.Stdout)
	assert.Contains(t, res.Error, "timed out")
}

func TestRunStream(t *testing.T) {
	a := startAgent(t, agentConfig{})
	var stdout, stderr []string
	var complete *client.Event
	for ev, err := range a.c.RunStream(t.Context(), client.Command{Cmd: `for i in 1 2 3; do echo out$i; echo err$i >&2; done; echo 'quote " \ tab	é'; exit 7`}) {
		require.NoError(t, err)
		switch ev.Type {
		case client.EventOutput:
			if ev.Stream == client.Stdout {
				stdout = append(stdout, string(ev.Data))
			} else {
				assert.Equal(t, client.Stderr, ev.Stream)
				stderr = append(stderr, string(ev.Data))
			}
		case client.EventComplete:
			require.Nil(t, complete, "one complete event")
			complete = &ev
		default:
			t.Fatalf("unexpected event %+v", ev)
		}
	}
	require.NotNil(t, complete, "the sequence ends with complete")
	assert.Equal(t, []string{"out1", "out2", "out3", "quote \" \\ tab\té"}, stdout)
	assert.Equal(t, []string{"err1", "err2", "err3"}, stderr)
	assert.Equal(t, 7, complete.Code)
	assert.False(t, complete.Truncated)
}

// TestRunStreamEveryLine checks that a long output arrives whole and in
// order through the iterator, whose Data is reused between events.
func TestRunStreamEveryLine(t *testing.T) {
	a := startAgent(t, agentConfig{})
	const n = 50_000
	next := 1
	for ev, err := range a.c.RunStream(t.Context(), client.Command{Cmd: "seq 1 " + strconv.Itoa(n)}) {
		require.NoError(t, err)
		if ev.Type == client.EventComplete {
			assert.Equal(t, 0, ev.Code)
			break
		}
		require.Equal(t, strconv.Itoa(next), string(ev.Data))
		next++
	}
	assert.Equal(t, n+1, next)
}

func TestRunStreamTimeout(t *testing.T) {
	a := startAgent(t, agentConfig{})
	var last client.Event
	for ev, err := range a.c.RunStream(t.Context(), client.Command{Cmd: "echo before; sleep 10", Timeout: 200 * time.Millisecond}) {
		require.NoError(t, err)
		last = ev
	}
	assert.Equal(t, client.EventComplete, last.Type)
	assert.Equal(t, 124, last.Code)
	assert.Contains(t, last.Message, "timed out")
}

// TestRunStreamBreakKillsCommand leaves the loop early: the connection
// closes and the agent kills the command's group.
func TestRunStreamBreakKillsCommand(t *testing.T) {
	a := startAgent(t, agentConfig{})
	for ev, err := range a.c.RunStream(t.Context(), client.Command{Cmd: "echo $$; sleep 100"}) {
		require.NoError(t, err)
		pid, err := strconv.Atoi(string(ev.Data))
		require.NoError(t, err)
		require.True(t, testutil.Alive(pid))
		defer func() {
			require.Eventually(t, func() bool { return !testutil.Alive(pid) }, 5*time.Second, 10*time.Millisecond)
		}()
		break
	}
}

func TestRunStreamStartFailureIsError(t *testing.T) {
	a := startAgent(t, agentConfig{shell: "/no/such/shell"})
	n := 0
	for ev, err := range a.c.RunStream(t.Context(), client.Command{Cmd: "true"}) {
		n++
		require.Error(t, err, "got event %+v", ev)
		var ae *client.Error
		require.ErrorAs(t, err, &ae)
		assert.Equal(t, http.StatusOK, ae.StatusCode, "reported by an error event")
		assert.Contains(t, ae.Message, "failed to start command")
	}
	assert.Equal(t, 1, n)
}

// TestRunStreamCutIsError cuts the connection mid-stream: the iterator
// must say so rather than end as if the command had.
func TestRunStreamCutIsError(t *testing.T) {
	a := startAgent(t, agentConfig{})
	r := startRelay(t, a.ts.Listener.Addr().String(), []int64{20_000}, nil)
	c := newClient(t, a.ts, "http://"+r.addr, testSecret)
	lines := 0
	var last error
	for ev, err := range c.RunStream(t.Context(), client.Command{Cmd: "seq 1 100000"}) {
		if err != nil {
			last = err
			break
		}
		require.Equal(t, client.EventOutput, ev.Type, "no complete: the stream was cut")
		lines++
	}
	require.Error(t, last)
	assert.ErrorIs(t, last, io.ErrUnexpectedEOF)
	assert.Contains(t, last.Error(), "cut")
	assert.Positive(t, lines)
}

// TestCommandFieldsOnTheWire checks what the client sends beyond the
// document: the timeout in seconds, the session, keepalive on streams.
func TestCommandFieldsOnTheWire(t *testing.T) {
	var mu sync.Mutex
	bodies := map[string]map[string]any{}
	record := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			var m map[string]any
			_ = json.Unmarshal(b, &m)
			mu.Lock()
			bodies[r.URL.Path] = m
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
			next.ServeHTTP(w, r)
		})
	}
	a := startAgent(t, agentConfig{wrap: record})
	// The agent runs commands only in sessions that exist.
	_, _, err := a.c.CreateSession(t.Context(), client.SessionConfig{ID: "s1"})
	require.NoError(t, err)
	cmd := client.Command{Cmd: "true", Timeout: 1500 * time.Millisecond, Session: "s1", Keepalive: true}
	_, err = a.c.Run(t.Context(), cmd)
	require.NoError(t, err)
	for _, err := range a.c.RunStream(t.Context(), cmd) {
		require.NoError(t, err)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[string]any{"cmd": "true", "timeout": 1.5, "session": "s1"}, bodies["/run"])
	assert.Equal(t, map[string]any{"cmd": "true", "timeout": 1.5, "session": "s1", "keepalive": true}, bodies["/run_streaming"])
}

func TestErrors(t *testing.T) {
	a := startAgent(t, agentConfig{})
	ctx := t.Context()

	t.Run("401", func(t *testing.T) {
		c := newClient(t, a.ts, a.ts.URL, "wrong")
		_, err := c.Run(ctx, client.Command{Cmd: "true"})
		var ae *client.Error
		require.ErrorAs(t, err, &ae)
		assert.Equal(t, http.StatusUnauthorized, ae.StatusCode)
		assert.Contains(t, ae.Message, "unauthorized")
		assert.Equal(t, "the agent refused the token (401 Unauthorized)", err.Error())
		for _, err := range c.RunStream(ctx, client.Command{Cmd: "true"}) {
			require.ErrorAs(t, err, &ae)
			assert.Equal(t, http.StatusUnauthorized, ae.StatusCode)
		}
		_, err = c.Health(ctx)
		assert.NoError(t, err, "/health needs no token")
	})
	t.Run("400", func(t *testing.T) {
		_, err := a.c.Run(ctx, client.Command{})
		var ae *client.Error
		require.ErrorAs(t, err, &ae)
		assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
		assert.Equal(t, "cmd is required", ae.Message)
		assert.Equal(t, "cmd is required (400 Bad Request)", err.Error())

		_, err = a.c.Run(ctx, client.Command{Cmd: "true", Cwd: "/no/such/dir"})
		require.ErrorAs(t, err, &ae)
		assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
		for _, err := range a.c.RunStream(ctx, client.Command{Cmd: "true", Cwd: "/no/such/dir"}) {
			require.ErrorAs(t, err, &ae)
			assert.Equal(t, http.StatusBadRequest, ae.StatusCode, "refused before the stream opens")
		}
	})
	t.Run("unknown process id", func(t *testing.T) {
		err := a.c.KillProcess(ctx, "no-such-id", "")
		assert.ErrorIs(t, err, client.ErrProcessNotFound)
		var ae *client.Error
		require.ErrorAs(t, err, &ae)
		assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
		for _, err := range a.c.ProcessLogs(ctx, "no-such-id", client.LogsOptions{}) {
			assert.ErrorIs(t, err, client.ErrProcessNotFound)
		}
		for _, err := range a.c.FollowLogs(ctx, "no-such-id", client.LogsOptions{}) {
			assert.ErrorIs(t, err, client.ErrProcessNotFound, "final, not retried")
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		url := "http://" + closedAddr(t)
		c := newClient(t, a.ts, url, testSecret)
		_, err := c.Run(ctx, client.Command{Cmd: "true"})
		var ce *client.ConnError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, url, ce.URL)
		assert.True(t, strings.HasPrefix(err.Error(), "cannot reach the agent at "+url+": "), err.Error())
		assert.Contains(t, err.Error(), "connection refused")

		start := time.Now()
		n := 0
		for _, err := range c.FollowLogs(ctx, "x", client.LogsOptions{MaxRetries: 2, RetryDelay: time.Millisecond}) {
			n++
			require.ErrorAs(t, err, &ce)
			assert.Contains(t, err.Error(), "giving up after 3 attempts")
		}
		assert.Equal(t, 1, n)
		assert.Less(t, time.Since(start), 5*time.Second)
	})
	t.Run("no such endpoint", func(t *testing.T) {
		c := newClient(t, a.ts, a.ts.URL+"/wrong-prefix", testSecret)
		_, err := c.ListProcesses(ctx)
		var ae *client.Error
		require.ErrorAs(t, err, &ae)
		assert.Equal(t, http.StatusNotFound, ae.StatusCode)
	})
	t.Run("invalid URL", func(t *testing.T) {
		for _, u := range []string{"127.0.0.1:3030", "ftp://h", "http://", "http://h/?q=1", "://"} {
			_, err := client.New(u, "t")
			assert.Error(t, err, u)
		}
	})
}

// closedAddr returns a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln := testutil.Serve(t, func(net.Conn) {})
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func TestBasePath(t *testing.T) {
	a := startAgent(t, agentConfig{server: server.Config{BasePath: "/koyeb-sandbox"}})
	h, err := a.c.Health(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "ok", h.Status)
	res, err := a.c.Run(t.Context(), client.Command{Cmd: "echo via-prefix"})
	require.NoError(t, err)
	assert.Equal(t, "via-prefix\n", res.Stdout)
}
