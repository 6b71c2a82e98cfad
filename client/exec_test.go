package client_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/client"
)

// countingConn counts the writes made on a connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// A large stdin frame reaches the socket in one write, not in the
// library's 4 KiB pieces, and arrives byte for byte; small frames and
// control messages still go out at once.
func TestExecStdinFrameInOneWrite(t *testing.T) {
	a := startAgent(t, agentConfig{})
	var writes atomic.Int64
	d := &net.Dialer{}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{c, &writes}, nil
	}}}
	defer hc.CloseIdleConnections()
	c, err := client.New(a.ts.URL, testSecret, client.WithHTTPClient(hc))
	require.NoError(t, err)
	x, err := c.Exec(t.Context(), client.ExecOptions{Cmd: "head -c 3 >&2; sha256sum", Stdin: true})
	require.NoError(t, err)
	defer x.Close()

	require.NoError(t, x.WriteStdin(t.Context(), []byte("ab")))
	require.NoError(t, x.WriteStdin(t.Context(), []byte("c"))) // the small frames pass at once: head reads them
	ev, err := x.Read(t.Context())
	require.NoError(t, err)
	assert.Equal(t, client.ExecEvent{Stream: client.Stderr, Data: []byte("abc")}, ev)

	const frames, size = 16, 256 << 10
	data := make([]byte, frames*size)
	_, _ = rand.Read(data)
	before := writes.Load()
	for i := range frames {
		require.NoError(t, x.WriteStdin(t.Context(), data[i*size:(i+1)*size]))
	}
	assert.LessOrEqual(t, writes.Load()-before, int64(frames+2), "writes for %d frames (a pong may add one)", frames)
	require.NoError(t, x.CloseStdin(t.Context()))
	var out []byte
	for {
		ev, err := x.Read(t.Context())
		require.NoError(t, err)
		if ev.Exit != nil {
			assert.Equal(t, 0, ev.Exit.Code)
			break
		}
		out = append(out, ev.Data...)
	}
	sum := sha256.Sum256(data)
	assert.Equal(t, hex.EncodeToString(sum[:])+"  -\n", string(out))
}

// A large stdin frame that the agent does not take (the command reads no
// stdin, the buffers are full) gives up when ctx ends, as any write of
// the connection does.
func TestExecStdinFrameHonoursContext(t *testing.T) {
	a := startAgent(t, agentConfig{})
	x, err := a.c.Exec(t.Context(), client.ExecOptions{Cmd: "sleep 100", Stdin: true})
	require.NoError(t, err)
	defer x.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	frame := make([]byte, 1<<20-1)
	for i := 0; ; i++ {
		require.Less(t, i, 256, "256 MiB taken by a command that reads nothing")
		if err = x.WriteStdin(ctx, frame); err != nil {
			break
		}
	}
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}
